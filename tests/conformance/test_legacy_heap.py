"""LEGACY on the heap backend: the whole conformance suite."""

from upsertmat.conformance.suite import MaterializerTests


class TestLegacyHeap(MaterializerTests):
    implementation = "LEGACY/heap"
