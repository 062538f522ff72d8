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


def open_rocksdb_every3(path: Path | None) -> StateBackend:
    """A commit interval of 3 units: deferred commits, the per-unit undo journal."""
    backend = RocksdbBackend(path)
    backend.commit_interval = 3
    return backend


TestRocksdbMachine = machine_for(open_rocksdb, persistent=True).TestCase
TestRocksdbEvery3Machine = machine_for(open_rocksdb_every3, persistent=True).TestCase
