from __future__ import annotations

from pathlib import Path

import pytest

from upsertmat.impls.settings import Backend, Settings
from upsertmat.impls.state import (
    BackendUnavailableError,
    CountingBackend,
    HeapBackend,
    StateLockedError,
    open_backend,
)
from upsertmat.impls.state.locking import DirectoryLock


def test_spark_is_refused_clearly() -> None:
    with pytest.raises(BackendUnavailableError, match="spark"):
        open_backend(Settings(backend=Backend.SPARK))


@pytest.mark.parametrize("backend", [Backend.ROCKSDB, Backend.LMDB])
def test_byte_backends_live_in_their_own_subdirectory(backend: Backend, tmp_path: Path) -> None:
    outer = DirectoryLock(tmp_path)  # what the CLI holds on --state-dir: no collision
    try:
        opened = open_backend(Settings(backend=backend, state_dir=tmp_path), name="op-1")
        try:
            assert opened.name == backend.value
            assert (tmp_path / backend.value / "op-1" / "db").is_dir()
            other = open_backend(Settings(backend=backend, state_dir=tmp_path), name="op-2")
            other.close()
            with pytest.raises(StateLockedError, match="op-1"):
                open_backend(Settings(backend=backend, state_dir=tmp_path), name="op-1")
        finally:
            opened.close()
    finally:
        outer.release()


@pytest.mark.parametrize("backend", [Backend.ROCKSDB, Backend.LMDB])
def test_temporary_byte_backends_are_removed_on_close(backend: Backend) -> None:
    opened = open_backend(Settings(backend=backend))
    root = opened.path  # type: ignore[attr-defined]
    assert root.is_dir()
    opened.close()
    assert not root.exists()


def test_counting_backend_counts_every_access() -> None:
    counting = CountingBackend(HeapBackend())
    values, rows, order = counting.value_state("v"), counting.map_state("m"), counting.sorted_map_state("s")
    values.put(b"c", 1)
    values.get(b"c")
    rows.put(b"c", b"k", 1)
    rows.put(b"c", b"j", 2)
    rows.delete(b"c", b"x")
    order.put(b"c", b"1", 1)
    order.last(b"c")
    order.first(b"c")
    order.before(b"c", b"2")
    assert (counting.counters.reads, counting.counters.writes, counting.counters.scanned) == (4, 5, 0)
    assert len(list(rows.items(b"c"))) == 2
    assert (counting.counters.reads, counting.counters.scanned) == (5, 2)
    rows.clear(b"c")
    counting.commit()
    assert (counting.counters.writes, counting.counters.commits) == (6, 1)
    assert counting.counters.accesses == 5 + 6 + 2
    counting.counters.reset()
    assert counting.counters.accesses == 0
    counting.close()
