"""The TTL timer queue: fires in expiry order, resumes past fired timers, never skips a late one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from upsertmat.impls.settings import Backend, Settings
from upsertmat.impls.state import StateBackend, open_backend
from upsertmat.impls.state.counting import CountingBackend
from upsertmat.impls.strategies.timers import Timers


@pytest.fixture(params=[Backend.HEAP, Backend.ROCKSDB, Backend.LMDB], ids=lambda backend: backend.value)
def backend(request: pytest.FixtureRequest) -> Iterator[StateBackend]:
    opened = open_backend(Settings(backend=request.param))
    yield opened
    opened.close()


def test_fires_due_timers_in_expiry_order(backend: StateBackend) -> None:
    timers = Timers(backend)
    for expiry, context in [(30, b"c"), (10, b"a"), (20, b"b"), (40, b"d")]:
        timers.add(expiry, context, seq=expiry)
    backend.commit()
    assert list(timers.pop_due(25)) == [(b"a", 10), (b"b", 20)]
    assert list(timers.pop_due(25)) == []
    assert list(timers.pop_due(100)) == [(b"c", 30), (b"d", 40)]


@pytest.mark.parametrize("commit_between", [False, True])
def test_a_timer_added_below_the_resume_point_still_fires(
    backend: StateBackend, commit_between: bool
) -> None:
    """A late event-time write can expire before timers that already fired."""
    timers = Timers(backend)
    timers.add(10, b"a")
    timers.add(20, b"b")
    assert list(timers.pop_due(15)) == [(b"a", 0)]
    if commit_between:
        backend.commit()
    timers.add(5, b"late")
    timers.add(12, b"later")
    assert list(timers.pop_due(15)) == [(b"late", 0), (b"later", 0)]
    assert list(timers.pop_due(20)) == [(b"b", 0)]
    assert timers.count() == 0


def test_a_new_queue_on_old_state_finds_the_remaining_timers(tmp_path: Path) -> None:
    """After a restart the queue has no resume point and seeks from the start."""
    settings = Settings(backend=Backend.LMDB, state_dir=tmp_path)
    first = open_backend(settings)
    timers = Timers(first)
    for expiry in (1, 2, 3):
        timers.add(expiry, b"k", seq=expiry)
    assert [seq for _, seq in timers.pop_due(1)] == [1]
    first.commit()
    first.close()
    second = open_backend(settings)
    try:
        assert [seq for _, seq in Timers(second).pop_due(3)] == [2, 3]
    finally:
        second.close()


def test_each_fired_timer_costs_one_seek_and_one_delete() -> None:
    """Seeks resume past fired timers: firing k timers reads k + 1 times, however many fired before."""
    counting = CountingBackend(open_backend(Settings(backend=Backend.ROCKSDB)))
    try:
        timers = Timers(counting)
        for expiry in range(1, 2001):
            timers.add(expiry, b"k", seq=expiry)
        counting.commit()
        assert len(list(timers.pop_due(1000))) == 1000
        counting.commit()
        counting.counters.reset()
        assert len(list(timers.pop_due(1010))) == 10
        assert (counting.counters.reads, counting.counters.writes) == (11, 10)
    finally:
        counting.close()
