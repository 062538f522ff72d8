from __future__ import annotations

from pathlib import Path

from upsertmat.conformance.backends import PersistentBackendTests, StateBackendTests, machine_for
from upsertmat.impls.state import StateBackend
from upsertmat.impls.state.rocksdb import RocksdbBackend


def open_rocksdb(path: Path | None) -> StateBackend:
    return RocksdbBackend(path)


class TestRocksdbBackend(StateBackendTests, PersistentBackendTests):
    persistent = True
    engine = "rocksdb"

    def open(self, path: Path | None) -> StateBackend:
        return open_rocksdb(path)


TestRocksdbMachine = machine_for(open_rocksdb, persistent=True).TestCase
