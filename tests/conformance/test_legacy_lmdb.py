"""LEGACY on LMDB: the whole conformance suite."""

from __future__ import annotations

from upsertmat.conformance.suite import MaterializerTests


class TestLegacyLmdb(MaterializerTests):
    implementation = "LEGACY/lmdb"
