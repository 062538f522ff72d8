"""The suite's tools behind the command line; nothing here is for subclassing.

- :mod:`.report`: run the suite once and write the per-rule report (``upsertmat conformance``);
- :mod:`.reproduce`: replay a report's counterexample against the model, input by input
  (``upsertmat conformance-reproduce``);
- :mod:`.matrix`: one suite run per implementation and engine, rendered as one page
  (``upsertmat conformance-matrix``);
- :mod:`.flink`: Apache Flink 2.3's real ``SinkUpsertMaterializer`` as a program under test
  (``upsertmat conformance-flink``; the ``flink`` extra).
"""
