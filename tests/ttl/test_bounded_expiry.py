"""Bounded expiry (``upsertmat.state.ttl.expiry-budget``): at most N timers fire per call,
the sweep catches up over later calls, and no output ever depends on the budget.

- The TTL parts of the conformance suite (hand-written scenarios, timed streams, the TTL and
  lifecycle state machines: model vs implementation step by step) with budget 1, the worst
  lag, for every strategy on heap and on LMDB (MAP and SORTED also on RocksDB).
- The bound itself: after a clock jump with K >> N due timers one ``advance_time`` fires N
  (pending timers drop by N, state accesses do not grow with K), later calls and inputs
  catch up, outputs unchanged throughout.
- A Hypothesis property: random streams with clock jumps, budget 1, 2, 3 or the default,
  equal to budget-unbounded (0) runs after every step (outputs, misses, visible elements).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any, ClassVar

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from upsertmat.conformance.generators import Advance, Step, TimedStream, timed_streams
from upsertmat.conformance.suite import TTL_CONFIGS, MaterializerTests, scaled_settings
from upsertmat.impls import Settings, create_named
from upsertmat.impls.config import EXPIRY_BUDGET, ConfigError, build_settings
from upsertmat.impls.settings import Backend
from upsertmat.impls.state import CountingBackend, HeapBackend, StateBackend, open_backend
from upsertmat.impls.strategies import (
    AdaptiveMaterializer,
    MapMaterializer,
    SortedMaterializer,
    StrategyBase,
    ValueMaterializer,
)
from upsertmat.impls.strategies.legacy import LegacyMaterializer
from upsertmat.impls.strategies.timers import Timers
from upsertmat.spec import Change, Keys, Row, RowKind, TtlSettings, delete, insert

BUDGET_ONE = Settings(expiry_budget=1)
SMALL_THRESHOLDS_BUDGET_ONE = Settings(expiry_budget=1, threshold_high=3, threshold_low=1)


class TtlOnlyTests(MaterializerTests):
    """The suite's TTL tests (and the lifecycle machine, which runs with TTL too) only."""

    impl_settings: ClassVar[Settings | None] = BUDGET_ONE
    test_scenario = None  # type: ignore[assignment]
    test_pinned_streams = None  # type: ignore[assignment]
    test_valid_streams = None  # type: ignore[assignment]
    test_bare_update_streams = None  # type: ignore[assignment]
    test_tolerated_streams = None  # type: ignore[assignment]
    test_long_histories = None  # type: ignore[assignment]
    test_state_machine = None  # type: ignore[assignment]


class TestLegacyHeapBudgetOne(TtlOnlyTests):
    implementation = "LEGACY/heap"


class TestValueHeapBudgetOne(TtlOnlyTests):
    implementation = "VALUE/heap"


class TestMapHeapBudgetOne(TtlOnlyTests):
    implementation = "MAP/heap"


class TestSortedHeapBudgetOne(TtlOnlyTests):
    implementation = "SORTED/heap"


class TestAdaptiveHeapBudgetOne(TtlOnlyTests):
    implementation = "ADAPTIVE/heap"
    impl_settings = SMALL_THRESHOLDS_BUDGET_ONE


class TestLegacyLmdbBudgetOne(TtlOnlyTests):
    implementation = "LEGACY/lmdb"


class TestValueLmdbBudgetOne(TtlOnlyTests):
    implementation = "VALUE/lmdb"


class TestMapLmdbBudgetOne(TtlOnlyTests):
    implementation = "MAP/lmdb"


class TestSortedLmdbBudgetOne(TtlOnlyTests):
    implementation = "SORTED/lmdb"


class TestAdaptiveLmdbBudgetOne(TtlOnlyTests):
    implementation = "ADAPTIVE/lmdb"
    impl_settings = SMALL_THRESHOLDS_BUDGET_ONE


class TestMapRocksdbBudgetOne(TtlOnlyTests):
    implementation = "MAP/rocksdb"


class TestSortedRocksdbBudgetOne(TtlOnlyTests):
    implementation = "SORTED/rocksdb"


# -- the setting ---------------------------------------------------------------------------------


def test_the_budget_is_a_setting_with_a_default_and_zero_for_unbounded() -> None:
    assert Settings().expiry_budget == build_settings([]).expiry_budget == 1000
    assert build_settings([("--set", {EXPIRY_BUDGET: "7"})]).expiry_budget == 7
    assert build_settings([("--set", {EXPIRY_BUDGET: 0})]).expiry_budget == 0
    for bad in ("-1", "lots", True):
        with pytest.raises(ConfigError, match=EXPIRY_BUDGET):
            build_settings([("--set", {EXPIRY_BUDGET: bad})])


# -- the bound -----------------------------------------------------------------------------------

KEYS = Keys(pk=(0,))
UPSERT_KEYS = Keys(pk=(0,), upsert_key=(1,))
LAYOUTS: dict[str, type[StrategyBase]] = {
    "LEGACY": LegacyMaterializer,
    "VALUE": ValueMaterializer,
    "MAP": MapMaterializer,
    "SORTED": SortedMaterializer,
    "ADAPTIVE": AdaptiveMaterializer,
}


def counted(name: str, budget: int, ttl_ms: int = 10) -> tuple[StrategyBase, CountingBackend]:
    backend = CountingBackend(HeapBackend())
    settings = Settings(
        ttl=TtlSettings(ttl_ms=ttl_ms), expiry_budget=budget, threshold_high=3, threshold_low=1
    )
    return COUNTED[name](KEYS, backend, settings), backend


def firing_counted(layout: type[StrategyBase]) -> type[StrategyBase]:
    """``layout`` counting its timer firings in ``fired`` (a subclass, not a patched method:
    compiled code calls a Python subclass's override, but not a method set on an instance)."""

    class FiringCounted(layout):  # type: ignore[valid-type,misc]
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            self.fired = [0]

        def _expire_element(self, context: bytes, seq: int) -> None:
            self.fired[0] += 1
            super()._expire_element(context, seq)

    return FiringCounted


COUNTED = {name: firing_counted(layout) for name, layout in LAYOUTS.items()}


def count_firings(materializer: StrategyBase) -> list[int]:
    """The one-element list ``materializer`` (built by :func:`counted`) counts its timer firings in."""
    fired: list[int] = getattr(materializer, "fired")  # noqa: B009 - set by FiringCounted
    return fired


PER_FIRING = 20
"""Generous state accesses per timer firing (a seek and a delete of the timer, then the
element's removal: MAP's worst case, a middle node, is 5 reads + 5 writes)."""


@pytest.mark.parametrize("name", LAYOUTS)
def test_one_advance_fires_at_most_the_budget_and_later_calls_catch_up(name: str) -> None:
    """K = 600 keys x 2 rows due at once, N = 7: each ``advance_time`` fires exactly N timers
    with at most N x PER_FIRING state accesses (independent of K); an input continues the
    sweep too (at most N per input); outputs and visible state equal a budget-unbounded
    run's throughout; once nothing is due, everything is physically gone."""
    budget = 7
    materializer, backend = counted(name, budget)
    reference, _ = counted(name, 0)
    fired = count_firings(materializer)
    try:
        for key in range(600):
            for target in (materializer, reference):
                target.process(insert(key, "a"))
                target.process(insert(key, "b"))
        backlog = materializer.stats()["timers"]
        assert backlog >= 600
        for target in (materializer, reference):
            target.advance_time(10)  # every timer is due
        assert fired[0] == budget
        assert reference.stats() == {"keys": 0, "elements": 0, "timers": 0}
        assert materializer.stats() == {"keys": 0, "elements": 0, "timers": backlog - budget}
        calls = 0
        while materializer._timers is not None and materializer._timers.has_due(materializer.now):
            fired[0] = 0
            backend.counters.reset()
            if calls % 2:  # nothing new becomes due: the sweep continues
                materializer.advance_time(10 + calls)
                reference.advance_time(10 + calls)
                assert fired[0] <= budget
                assert backend.counters.accesses <= budget * PER_FIRING
            else:  # an input continues the sweep too, and sees its (expired) key empty
                key = 599 - calls
                for change in (insert(key, "c"), delete(key, "c")):
                    assert materializer.process(change) == reference.process(change)
                    assert materializer.retract_misses == reference.retract_misses == 0
                assert fired[0] <= 2 * budget
            assert list(materializer.export_elements()) == list(reference.export_elements()) == []
            calls += 1
        assert calls >= backlog // (2 * budget)
        materializer.advance_time(10_000)  # the stale timers of the c rows
        assert materializer.stats() == {"keys": 0, "elements": 0, "timers": 0}
    finally:
        materializer.close()
        reference.close()


@pytest.mark.parametrize("name", ["MAP", "SORTED", "ADAPTIVE"])
def test_an_input_meeting_an_expired_duplicate_chain_removes_it_in_linear_work(name: str) -> None:
    """n equal rows (one match-key chain, no upsert key), all expired, the sweep 1 timer in:
    the next input on the key removes the n - 1 left from the chain's front, O(1) accesses
    each, not from the tail, where each would walk the chain (O(n^2) in all)."""
    n = 200
    materializer, backend = counted(name, 1)
    reference, _ = counted(name, 0)
    try:
        for target in (materializer, reference):
            for _ in range(n):
                target.process(insert(1, "a"))
            target.advance_time(10)
        assert materializer.stats()["timers"] >= n - 1  # (ADAPTIVE: + the VALUE-mode timer)
        assert materializer.stats()["elements"] == 0
        backend.counters.reset()
        change = insert(1, "b")
        assert materializer.process(change) == reference.process(change) == Change(RowKind.INSERT, change.row)
        assert backend.counters.accesses <= 12 * n
        assert list(materializer.export_elements()) == list(reference.export_elements())
    finally:
        materializer.close()
        reference.close()


@pytest.mark.parametrize("name", LAYOUTS)
def test_a_budget_of_zero_fires_everything_at_once(name: str) -> None:
    materializer, _ = counted(name, 0)
    fired = count_firings(materializer)
    try:
        for key in range(50):
            materializer.process(insert(key, "a"))
        materializer.advance_time(10)
        assert fired[0] == 50
        assert materializer.stats() == {"keys": 0, "elements": 0, "timers": 0}
    finally:
        materializer.close()


# -- the timer queue -----------------------------------------------------------------------------


@pytest.fixture(params=[Backend.HEAP, Backend.ROCKSDB, Backend.LMDB], ids=lambda backend: backend.value)
def backend(request: pytest.FixtureRequest) -> Iterator[StateBackend]:
    opened = open_backend(Settings(backend=request.param))
    yield opened
    opened.close()


def test_pop_due_stops_at_the_budget_and_has_due_knows_without_an_access(backend: StateBackend) -> None:
    counting = CountingBackend(backend)
    timers = Timers(counting)
    for expiry in (10, 20, 30, 40, 50):
        timers.add(expiry, b"k", seq=expiry)
    assert not timers.has_due(5)
    assert list(timers.pop_due(45, budget=2)) == [(b"k", 10), (b"k", 20)]
    counting.counters.reset()
    assert timers.has_due(45) and not timers.has_due(29)
    assert counting.counters.accesses == 0
    assert list(timers.pop_due(45, budget=2)) == [(b"k", 30), (b"k", 40)]
    assert not timers.has_due(45)
    assert list(timers.pop_due(45, budget=2)) == []
    timers.add(44, b"late")  # a late event-time write below the clock: due at once
    assert timers.has_due(45)
    assert list(timers.pop_due(100)) == [(b"late", 0), (b"k", 50)]
    assert not timers.has_due(10**9)


def test_has_due_after_forgetting_the_hints_seeks_once(backend: StateBackend) -> None:
    counting = CountingBackend(backend)
    timers = Timers(counting)
    timers.add(10, b"a")
    timers.add(20, b"b")
    counting.commit()
    timers.forget_hints()
    counting.counters.reset()
    assert timers.has_due(10) and timers.has_due(15) and not timers.has_due(9)
    assert counting.counters.reads == 1


# -- the property: no output depends on the budget -----------------------------------------------

STRATEGIES = ("LEGACY", "VALUE", "MAP", "SORTED", "ADAPTIVE")
DEFAULT_BUDGET = Settings().expiry_budget


def run_in_lockstep(
    name: str, ttl: TtlSettings, budget: int, stream: TimedStream, mode: str = "process"
) -> None:
    """``name`` on heap with ``budget`` vs with budget 0 (unbounded), after every step:
    outputs, misses and visible elements equal; the budgeted one's layout holds. ``mode``:
    the budgeted one gets its changes through ``process``, ``process_many`` or
    ``process_many`` with async state (the shell's three per-input loops)."""
    base = Settings(ttl=ttl, threshold_high=3, threshold_low=1) if name == "ADAPTIVE" else Settings(ttl=ttl)
    bounded_settings = replace(base, expiry_budget=budget, async_state=mode == "async")
    bounded = create_named(f"{name}/heap", stream.keys, bounded_settings)
    eager = create_named(f"{name}/heap", stream.keys, replace(base, expiry_budget=0))
    try:
        assert isinstance(bounded, StrategyBase) and isinstance(eager, StrategyBase)
        for index, step in enumerate(stream.steps):
            where = f"step [{index}] {step!r} ({name}, budget {budget}, {ttl})"
            if isinstance(step, Advance):
                bounded.advance_time(step.time)
                eager.advance_time(step.time)
            elif mode == "process":
                assert bounded.process(step) == eager.process(step), where
            else:
                assert bounded.process_many([step]) == [eager.process(step)], where
            assert bounded.retract_misses == eager.retract_misses, where
            assert list(bounded.export_elements()) == list(eager.export_elements()), where
            assert list(bounded.histories()) == list(eager.histories()), where
            assert bounded.stats()["elements"] == eager.stats()["elements"], where
            bounded._check()
        # The sweep catches up: once no timer is due, nothing stored is invisible. (Pending
        # timers not yet due may differ in number: stale ones, e.g. ADAPTIVE re-arming a key
        # it converted while an expired element was still stored, fire harmlessly later.)
        later = bounded.now
        while bounded._timers is not None and bounded._timers.has_due(bounded.now):
            later += 1
            bounded.advance_time(later)
            eager.advance_time(later)
        stored = [(c, bounded._elements(c)) for c in bounded._contexts() if bounded._elements(c)]
        assert stored == list(bounded.export_elements()) == list(eager.export_elements())
    finally:
        bounded.close()
        eager.close()


@st.composite
def lagging_streams(draw: st.DrawFn) -> TimedStream:
    """Streams that keep a budget-1 sweep behind: up to 6 sink keys with several (also
    duplicate) rows each, retractions mostly of rows added before (so they match, also
    rows whose element has expired or sits behind expired ones), ticks and jumps past the
    TTL of 5 (many timers due at once), event-time stamps late or early."""
    keys = draw(st.sampled_from((Keys(pk=(0,)), Keys(pk=(0,), upsert_key=(1,)))), label="keys")
    clock = 0
    added: list[Row] = []
    steps: list[Step] = []
    for _ in range(draw(st.integers(1, 60), label="length")):
        what = draw(st.sampled_from(("add", "add", "retract", "retract", "tick", "jump")))
        if what in ("tick", "jump"):
            clock += draw(st.integers(1, 3) if what == "tick" else st.integers(4, 12))
            steps.append(Advance(clock))
            continue
        ts = max(0, clock + draw(st.integers(-6, 4)))
        fresh: Row = (draw(st.integers(0, 5)), draw(st.integers(0, 2)), 0, draw(st.integers(0, 2)))
        row = fresh
        if what == "add":
            added.append(fresh)
            kinds = (RowKind.INSERT, RowKind.UPDATE_AFTER)
        else:
            kinds = (RowKind.UPDATE_BEFORE, RowKind.DELETE)
            if added and draw(st.integers(0, 3)) > 0:
                row = draw(st.sampled_from(added))
        steps.append(Change(draw(st.sampled_from(kinds)), row, ts=ts))
    return TimedStream(keys, tuple(steps))


JUMPY_STREAMS = st.one_of(
    lagging_streams(),
    st.sampled_from((4, 12, 40)).flatmap(lambda jump: timed_streams(max_advance=jump)),
)


def _c(kind: RowKind, pk: int, uk: int, payload: int = 0) -> Change:
    return Change(kind, (pk, uk, 0, payload))


_I, _U, _D = RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE
ROLLBACK_OVER_EXPIRED = TimedStream(
    Keys(pk=(0,), upsert_key=(1,)),
    (
        *(_c(_I, 2, uk) for uk in range(3)),  # key 2: timers at 5, ahead of key 1's
        _c(_I, 1, 0),  # x at 0
        Advance(1),
        _c(_I, 1, 1),  # y at 1: expires at 6
        Advance(4),
        _c(_U, 1, 0, 1),  # x replaced in place, re-stamped 4: x is now live longer than y
        Advance(5),
        _c(_I, 1, 2),  # z at 5, the tail
        Advance(6),  # budget 1: y's timer is still behind stale and key-2 timers
        _c(_D, 1, 2),  # rule 9: the previous *visible* row is x, not the expired y
    ),
)
"""Rule 9 while the sweep lags: the element before the removed tail is expired but stored."""

FIRST_MATCH_EXPIRED = TimedStream(
    Keys(pk=(0,)),
    (
        *(_c(_I, 2, uk) for uk in range(3)),  # key 2: timers at 5, ahead of key 1's
        Advance(1),
        _c(_I, 1, 0),  # a1 at 1: expires at 6
        Advance(3),
        _c(_I, 1, 0),  # a2 at 3, a duplicate of a1 (same match key)
        _c(_I, 1, 1),  # b, the tail
        Advance(6),  # budget 1: a1 is expired but still stored, first of its chain
        _c(_D, 1, 0),  # matches a2 (a1 is invisible): nothing emitted, b and only b remains
        _c(_D, 1, 1),  # then -D b empties the key
    ),
)
"""Rule 6 while the sweep lags: the first stored match is expired, the second is the match."""

_A = (1, "u1", 10, "a")
ADAPTIVE_CONVERTED_WHILE_LAGGING = TimedStream(
    Keys(pk=(0,)),
    (
        Change(_I, _A, ts=0),
        Change(_I, _A, ts=0),
        Advance(1),
        Change(_I, _A, ts=1),  # ADAPTIVE (high 3): MAP mode, a timer re-armed per node
        Advance(5),  # budget 1 fires a stale VALUE-mode timer; two nodes are expired
        Change(_I, _A, ts=5),  # the chain trim removes them
        Change(_I, _A, ts=5),
    ),
)
"""Found by Hypothesis against an over-strict check: after catching up, the number of pending
timers *not yet due* differed from an unbounded run's (stale ones, harmless); what must hold,
and is checked, is outputs per step and stored == visible once no timer is due."""

PROCESSING = TtlSettings(ttl_ms=5)


@scaled_settings(5.0)
@example(name="ADAPTIVE", ttl=PROCESSING, budget=1, stream=ADAPTIVE_CONVERTED_WHILE_LAGGING, mode="process")
@example(name="MAP", ttl=PROCESSING, budget=1, stream=ROLLBACK_OVER_EXPIRED, mode="process")
@example(name="SORTED", ttl=PROCESSING, budget=1, stream=ROLLBACK_OVER_EXPIRED, mode="process")
@example(name="ADAPTIVE", ttl=PROCESSING, budget=1, stream=ROLLBACK_OVER_EXPIRED, mode="process")
@example(name="VALUE", ttl=PROCESSING, budget=1, stream=ROLLBACK_OVER_EXPIRED, mode="process")
@example(name="LEGACY", ttl=PROCESSING, budget=1, stream=ROLLBACK_OVER_EXPIRED, mode="process")
@example(name="MAP", ttl=PROCESSING, budget=1, stream=FIRST_MATCH_EXPIRED, mode="process")
@example(name="SORTED", ttl=PROCESSING, budget=1, stream=FIRST_MATCH_EXPIRED, mode="process")
@example(name="ADAPTIVE", ttl=PROCESSING, budget=1, stream=FIRST_MATCH_EXPIRED, mode="process")
@example(name="VALUE", ttl=PROCESSING, budget=1, stream=FIRST_MATCH_EXPIRED, mode="process")
@example(name="LEGACY", ttl=PROCESSING, budget=1, stream=FIRST_MATCH_EXPIRED, mode="process")
@given(
    name=st.sampled_from(STRATEGIES),
    ttl=st.sampled_from(TTL_CONFIGS),
    budget=st.sampled_from((1, 2, 3, DEFAULT_BUDGET)),
    stream=JUMPY_STREAMS,
    mode=st.sampled_from(("process", "process_many", "async")),
)
def test_outputs_never_depend_on_the_budget(
    name: str, ttl: TtlSettings, budget: int, stream: TimedStream, mode: str
) -> None:
    run_in_lockstep(name, ttl, budget, stream, mode)
