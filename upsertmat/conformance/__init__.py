"""upsertmat.conformance — the reusable conformance suite (see docs/conformance.md).

Modules: ``suite`` (``MaterializerTests``, the class to subclass), ``scenarios`` (hand-written
catalogue), ``generators`` (Hypothesis strategies for valid, upsert-style, long and tolerated
streams), ``checks`` (scenario and differential check functions), ``machine`` (the state
machine), ``pinned`` (streams replayed first), ``tables`` (keyed tables for the convergence
property), ``plugin`` (the pytest plugin: profiles and ``--upsertmat-impl``).
"""
