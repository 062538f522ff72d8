from __future__ import annotations

from pathlib import Path

from upsertmat.impls.state import StateBackend
from upsertmat.impls.state.lmdb import LmdbBackend

from .suite import PersistentBackendTests, StateBackendTests, machine_for


def open_lmdb(path: Path | None) -> StateBackend:
    return LmdbBackend(path)


class TestLmdbBackend(StateBackendTests, PersistentBackendTests):
    persistent = True
    engine = "lmdb"

    def open(self, path: Path | None) -> StateBackend:
        return open_lmdb(path)


TestLmdbMachine = machine_for(open_lmdb, persistent=True).TestCase
