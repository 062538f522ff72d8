"""LEGACY on RocksDB: the whole conformance suite."""

from __future__ import annotations

from upsertmat.conformance.suite import MaterializerTests


class TestLegacyRocksdb(MaterializerTests):
    implementation = "LEGACY/rocksdb"
