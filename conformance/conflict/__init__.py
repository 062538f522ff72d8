"""The ``ON CONFLICT DO NOTHING | DO ERROR`` suite and its parts (docs/conformance.md).

:class:`~.suite.ConflictMaterializerTests` is the class a test module subclasses (exported as
``upsertmat.conformance.ConflictMaterializerTests``); the rest is what it runs: the hand-written
catalogue (:mod:`.scenarios`), Hypothesis streams with watermark lines (:mod:`.generators`),
driving an implementation and the model line by line (:mod:`.checks`) and the state machine with
restart, rescaling and migration between backends (:mod:`.machine`).
"""
