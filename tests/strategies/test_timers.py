"""The TTL timer queue: fires in expiry order, resumes past fired timers, never skips a late one."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from upsertmat.impls.settings import Backend, Settings
from upsertmat.impls.state import CorruptStateError, StateBackend, open_backend
from upsertmat.impls.state.codec import encode_seq
from upsertmat.impls.state.counting import CountingBackend
from upsertmat.impls.strategies.timers import LONG_CONTEXT, Timers


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


def test_long_contexts_are_hashed_and_fire_with_their_real_context(backend: StateBackend) -> None:
    """Contexts beyond LONG_CONTEXT bytes (and any starting with 0xff) get fixed-size keys on
    every backend; shorter ones keep the plain key ``expiry + seq + context -> 0``."""
    timers = Timers(backend)
    contexts = [b"a", b"c" * LONG_CONTEXT, b"c" * (LONG_CONTEXT + 1), b"d" * 5000, b"\xff", b"\xffx"]
    for seq, context in enumerate(contexts):
        timers.add(10, context, seq)
        timers.add(20 + seq, context, seq)
    backend.commit()
    state = backend.sorted_map_state("ttl_timers")
    keys = dict(state.items(b""))
    prefix = encode_seq(10)
    assert keys[prefix + encode_seq(0) + b"a"] == 0
    assert keys[prefix + encode_seq(1) + b"c" * LONG_CONTEXT] == 0
    for seq in (2, 3, 4, 5):
        assert (
            keys[prefix + encode_seq(seq) + b"\xff" + hashlib.sha256(contexts[seq]).digest()] == contexts[seq]
        )
    assert max(len(key) for key in keys) == 16 + LONG_CONTEXT
    assert sorted(timers.pop_due(10)) == sorted((context, seq) for seq, context in enumerate(contexts))
    assert list(timers.pop_due(100)) == [(context, seq) for seq, context in enumerate(contexts)]
    assert timers.count() == 0


def test_a_damaged_hashed_timer_is_an_error(backend: StateBackend) -> None:
    backend.sorted_map_state("ttl_timers").put(
        b"", encode_seq(1) + encode_seq(0) + b"\xff" + b"\x00" * 32, b"x"
    )
    with pytest.raises(CorruptStateError, match="ttl_timers"):
        list(Timers(backend).pop_due(5))


def test_plain_timers_written_before_hashing_still_fire(tmp_path: Path) -> None:
    """A context longer than LONG_CONTEXT under a plain key (written by an earlier version) is
    the key's tail, as before; its new timers are hashed, and both fire with the real context."""
    settings = Settings(backend=Backend.LMDB, state_dir=tmp_path)
    first = open_backend(settings)
    context = b"p" * 400
    first.sorted_map_state("ttl_timers").put(b"", encode_seq(5) + encode_seq(1) + context, 0)
    first.commit()
    first.close()
    second = open_backend(settings)
    try:
        timers = Timers(second)
        timers.add(6, context, 2)
        assert list(timers.pop_due(10)) == [(context, 1), (context, 2)]
    finally:
        second.close()
