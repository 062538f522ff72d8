"""ON CONFLICT DO ERROR | DO NOTHING on heap, RocksDB and LMDB: the whole conflict suite."""

from __future__ import annotations

from upsertmat.conformance import ConflictMaterializerTests


class TestConflictHeap(ConflictMaterializerTests):
    backend = "heap"


class TestConflictRocksdb(ConflictMaterializerTests):
    backend = "rocksdb"


class TestConflictLmdb(ConflictMaterializerTests):
    backend = "lmdb"
