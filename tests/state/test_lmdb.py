from __future__ import annotations

from pathlib import Path

import pytest

from upsertmat.conformance.backends import PersistentBackendTests, StateBackendTests, machine_for
from upsertmat.impls.settings import LmdbDurability
from upsertmat.impls.state import StateBackend
from upsertmat.impls.state.lmdb import LmdbBackend


def open_lmdb(path: Path | None) -> StateBackend:
    return LmdbBackend(path)


class TestLmdbBackend(StateBackendTests, PersistentBackendTests):
    persistent = True
    engine = "lmdb"

    def open(self, path: Path | None) -> StateBackend:
        return open_lmdb(path)


def open_lmdb_every3(path: Path | None) -> StateBackend:
    """A commit interval of 3 units: deferred commits, the per-unit undo journal."""
    backend = LmdbBackend(path)
    backend.commit_interval = 3
    return backend


TestLmdbMachine = machine_for(open_lmdb, persistent=True).TestCase
TestLmdbEvery3Machine = machine_for(open_lmdb_every3, persistent=True).TestCase


def test_map_grows_at_commit_boundaries(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "db", map_size=1 << 20)
    try:
        state = backend.map_state("m")
        for n in range(3000):
            state.put(b"c", n.to_bytes(4, "big"), "x" * 1000)  # ~3 MB in all: 3x the first map
            backend.commit()
        assert backend.env.info()["map_size"] > 1 << 20
        assert state.get(b"c", (2999).to_bytes(4, "big")) == "x" * 1000
    finally:
        backend.close()


@pytest.mark.parametrize("durability", list(LmdbDurability), ids=lambda mode: mode.value)
def test_every_durability_mode_persists(tmp_path: Path, durability: LmdbDurability) -> None:
    backend = LmdbBackend(tmp_path / "db", durability=durability)
    backend.sorted_map_state("s").put(b"c", b"k", [1])
    backend.commit()
    backend.close()
    backend = LmdbBackend(tmp_path / "db")
    try:
        assert backend.sorted_map_state("s").last(b"c") == (b"k", [1])
    finally:
        backend.close()


def test_keys_beyond_the_lmdb_limit_are_a_clear_error(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "db")
    try:
        with pytest.raises(ValueError, match="LMDB keys are limited to 511 bytes"):
            backend.map_state("m").put(b"c" * 300, b"k" * 300, 1)
        backend.map_state("m").put(b"c" * 200, b"k" * 200, 1)  # fits
        backend.commit()
    finally:
        backend.close()
