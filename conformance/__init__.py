"""upsertmat.conformance — the reusable conformance suite (see docs/conformance.md).

Modules: ``suite`` (``MaterializerTests``, the class to subclass), ``scenarios`` (hand-written
catalogue), ``generators`` (Hypothesis strategies for valid, upsert-style, long and tolerated
streams), ``checks`` (scenario and differential check functions), ``mismatch`` (the failure
they raise: its inputs and the rule it breaks), ``machine`` (the state machine), ``pinned``
(streams replayed first, the TTL probe), ``tables`` (keyed tables for the convergence
property), ``backends`` (``StateBackendTests``, the keyed-state backend suite), ``profiles``
(the namespaced Hypothesis profiles), ``misses`` (rule-7 misses at DEBUG inside the suite),
``plugin`` (the pytest plugin: ``--upsertmat-impl``, ``--upsertmat-quick``, profiles only when
the suite is selected), ``report``/``reproduce`` (``upsertmat conformance``'s report and the
command replaying its counterexamples).

Needs the ``conformance`` extra (pytest, Hypothesis). Layering: ``conformance`` imports only
``impls`` and ``spec`` (``tests/test_layers.py``).
"""
