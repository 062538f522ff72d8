"""No half-applied input: a failure at ANY state access (or at the commit) leaves the state
exactly as before.

For every strategy on every in-process backend, each input of a stream is first attempted
with a failure injected at its 1st, 2nd, ... state access (until an attempt needs fewer
accesses than the budget and succeeds). After every failed attempt the exported state, the
clock and the rule-7 counter must equal the model's state *before* that input; in the end
every emitted change must equal the model's, as if no attempt had ever failed.

The byte backends run this at commit intervals 1, 7 and 1000 (``execution.checkpointing
.interval``): with 7 the stream crosses durable commits, with 1000 every input stays in one
pending batch, so a failed input must undo only its own writes, never the earlier inputs
since the last durable commit. In the end the state is closed (which commits) and reopened:
what was committed is the model's state after the whole stream.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from upsertmat.impls import Settings, Strategy
from upsertmat.impls.conflict import CompactingMaterializer
from upsertmat.impls.settings import Backend
from upsertmat.impls.state import open_backend
from upsertmat.impls.state.counting import Counters, CountingBackend
from upsertmat.impls.state.heap import HeapBackend
from upsertmat.impls.strategies import legacy_heap, value_heap
from upsertmat.impls.strategies.adaptive import AdaptiveMaterializer
from upsertmat.impls.strategies.adaptive_heap import HeapAdaptiveMaterializer
from upsertmat.impls.strategies.common import StrategyBase
from upsertmat.impls.strategies.legacy import LegacyMaterializer
from upsertmat.impls.strategies.legacy_heap import HeapLegacyMaterializer
from upsertmat.impls.strategies.linked_map import MapMaterializer
from upsertmat.impls.strategies.linked_map_heap import HeapMapMaterializer
from upsertmat.impls.strategies.sorted import SortedMaterializer
from upsertmat.impls.strategies.sorted_heap import HeapSortedMaterializer
from upsertmat.impls.strategies.value import ValueMaterializer
from upsertmat.impls.strategies.value_heap import HeapValueMaterializer
from upsertmat.impls.strategies.variants import build
from upsertmat.spec import (
    Change,
    ConflictBehavior,
    ConflictModel,
    Granularity,
    Keys,
    ModelMaterializer,
    TimeDomain,
    TtlSettings,
    UpdateType,
    delete,
    insert,
    update_after,
    update_before,
)


class InjectedFailure(Exception):
    """Raised by the wrapped backend at the chosen state access."""


class FailingCounters(Counters):
    """Counters that raise once the number of state accesses plus commits reaches ``budget``
    (None: never): a failure at every read, write, scanned entry and at the commit (counted
    before the backend commits, so the input's writes are all made and none is committed)."""

    budget: int | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        budget = self.budget
        counted = name in ("reads", "writes", "scanned", "commits")
        if counted and budget is not None and self.accesses + self.commits >= budget:
            self.budget = None
            raise InjectedFailure(f"injected at step {self.accesses + self.commits} ({name})")


STRATEGIES: dict[str, type[StrategyBase]] = {
    "LEGACY": LegacyMaterializer,
    "VALUE": ValueMaterializer,
    "MAP": MapMaterializer,
    "SORTED": SortedMaterializer,
    "ADAPTIVE": AdaptiveMaterializer,
}
BACKENDS = (Backend.HEAP, Backend.ROCKSDB, Backend.LMDB)


def stream() -> list[Change | int]:
    """Appends, in-place replacements of non-last rows, retractions of first/last/middle rows,
    misses, duplicates and clock advances, over two sink keys (ints are clock lines)."""
    return [
        insert(1, 1, "a"),
        update_after(1, 2, "b"),
        insert(2, 1, "x"),
        update_after(1, 3, "c"),
        update_after(1, 1, "a2"),  # replaces a non-last row (upsert key 1) / appends without
        10,
        update_before(1, 2, "b"),  # a middle row
        update_before(9, 9, "none"),  # a miss (rule 7)
        update_after(1, 3, "c"),  # a duplicate of the tail
        update_before(1, 3, "c"),  # the last element: emits +U of the new last
        20,
        delete(2, 1, "x"),  # empties key 2
        update_after(1, 4, "d"),
        update_after(1, 5, "e"),
        update_after(1, 7, 2.5),  # a row whose token is not itself: its own match-key list on heap
        update_before(1, 1, "a2"),  # the first element
        35,
        update_before(1, 7, 2.5),
        update_before(1, 5, "e"),
        update_before(1, 4, "d"),
        delete(1, 3, "c"),
        insert(1, 6, "f"),
    ]


def apply(materializer: Any, item: Change | int) -> Change | None:
    """Feed one stream item: a change, or a clock advance (no output)."""
    if isinstance(item, int):
        materializer.advance_time(item)
        return None
    result: Change | None = materializer.process(item)
    return result


def export(materializer: Any, stamps: bool) -> list[tuple[bytes, list[Any]]]:
    """Every key's elements in order; stamps only mean something with TTL on."""
    return sorted((context, [(tuple(row), stamp if stamps else 0) for row, stamp in elements])
                  for context, elements in materializer.export_elements())  # fmt: skip


CASES = [
    pytest.param(
        strategy,
        backend,
        upsert,
        ttl,
        interval,
        id=f"{strategy}-{backend.value}-{'uk' if upsert else 'row'}-{ttl}-every{interval}",
    )
    for strategy in STRATEGIES
    for backend in BACKENDS
    for upsert, ttl in ((True, "off"), (False, "off"), (True, "ttl"))
    for interval in ((1,) if backend is Backend.HEAP else (1, 7, 1000))
]


@pytest.mark.parametrize(("strategy", "backend", "upsert", "ttl", "interval"), CASES)
def test_a_failure_at_any_state_access_leaves_no_trace(
    strategy: str, backend: Backend, upsert: bool, ttl: str, interval: int, tmp_path: Path
) -> None:
    keys = Keys(pk=(0,), upsert_key=(1,) if upsert else ())
    ttl_settings = TtlSettings()
    if ttl == "ttl":
        ttl_settings = TtlSettings(15, TimeDomain.PROCESSING_TIME, UpdateType.ON_READ_AND_WRITE)
    settings = Settings(strategy=Strategy(strategy), backend=backend, ttl=ttl_settings,
                        threshold_high=3, threshold_low=2, checkpoint_interval=interval,
                        state_dir=None if backend is Backend.HEAP else tmp_path)  # fmt: skip
    counting = CountingBackend(open_backend(settings))
    counters = FailingCounters()
    counting.counters = counters
    materializer = STRATEGIES[strategy](keys, counting, settings)
    granularity = Granularity.PER_KEY if strategy == "LEGACY" else Granularity.PER_ELEMENT
    model = ModelMaterializer(keys, ttl=ttl_settings, granularity=granularity)
    failures = 0
    try:
        for step, item in enumerate(stream()):
            before = (export(model, ttl_settings.enabled), model.now, model.retract_misses)
            budget = 1
            while True:
                counters.reset()
                counters.budget = budget
                try:
                    got = apply(materializer, item)
                except InjectedFailure:
                    failures += 1
                    counters.budget = None
                    after = (
                        export(materializer, ttl_settings.enabled),
                        materializer.now,
                        materializer.retract_misses,
                    )
                    assert after == before, f"step {step}: failure at access {budget} left a trace"
                    budget += 1
                    continue
                counters.budget = None
                break
            expected = apply(model, item)
            assert got == expected, f"step {step}"
            if got is not None and expected is not None:
                assert [type(value) for value in got.row] == [type(value) for value in expected.row]
        assert export(materializer, ttl_settings.enabled) == export(model, ttl_settings.enabled)
    finally:
        materializer.close()
    assert failures > len(stream())  # the injection really hit state accesses
    if backend is Backend.HEAP:
        return
    reopened = STRATEGIES[strategy](keys, open_backend(replace(settings, checkpoint_interval=None)), settings)
    try:
        assert export(reopened, ttl_settings.enabled) == export(model, ttl_settings.enabled)
    finally:
        reopened.close()


class FailingCommitHeap(HeapBackend):
    """A heap backend whose next ``commit`` raises while ``armed``: every write of the input
    (VALUE's in-place changes included) is made before the failure."""

    armed = False

    def commit(self) -> None:
        if self.armed:
            self.armed = False
            raise InjectedFailure("injected at commit")
        super().commit()


@pytest.mark.parametrize(
    ("strategy", "thresholds"),
    [
        ("LEGACY", (3, 2)),
        ("VALUE", (3, 2)),
        ("MAP", (3, 2)),
        ("SORTED", (3, 2)),
        ("ADAPTIVE", (3, 2)),
        ("ADAPTIVE", (1, 0)),
    ],
    ids=["LEGACY", "VALUE", "MAP", "SORTED", "ADAPTIVE-3-2", "ADAPTIVE-1-0"],
)
@pytest.mark.parametrize("upsert", [True, False], ids=["uk", "row"])
@pytest.mark.parametrize("update", [UpdateType.ON_CREATE_AND_WRITE, UpdateType.ON_READ_AND_WRITE])
def test_in_place_records_on_heap_roll_back_a_failed_input(
    strategy: str, thresholds: tuple[int, int], upsert: bool, update: UpdateType
) -> None:
    """LEGACY, VALUE and ADAPTIVE (VALUE mode) on heap change records in place (legacy_heap.py,
    value_heap.py, adaptive_heap.py), MAP, ADAPTIVE (MAP mode) and SORTED write the heap dicts directly
    (linked_map_heap.py, sorted_heap.py), each journaling the inverse: an input that fails
    after all its changes (ADAPTIVE's conversions to MAP and back included; with threshold
    high 1 a new key's first row converts it) leaves state, clock and misses as before."""
    keys = Keys(pk=(0,), upsert_key=(1,) if upsert else ())
    ttl = TtlSettings(0, TimeDomain.PROCESSING_TIME, update)  # TTL off: the in-place path
    backend = FailingCommitHeap()
    settings = Settings(ttl=ttl, threshold_high=thresholds[0], threshold_low=thresholds[1])
    materializer = build(STRATEGIES[strategy], keys, backend, settings)
    direct = (
        HeapLegacyMaterializer
        | HeapValueMaterializer
        | HeapAdaptiveMaterializer
        | HeapMapMaterializer
        | HeapSortedMaterializer
    )
    assert isinstance(materializer, direct)
    model = ModelMaterializer(keys, ttl=ttl, granularity=materializer.granularity)
    for step, item in enumerate(stream()):
        before = (export(materializer, True), materializer.now, materializer.retract_misses)
        if not isinstance(item, int):
            backend.armed = True
            with pytest.raises(InjectedFailure):
                materializer.process(item)
            assert (export(materializer, True), materializer.now, materializer.retract_misses) == before
            materializer._check()
        assert apply(materializer, item) == apply(model, item), f"step {step}"
        materializer._check()
    stamps = materializer.granularity is Granularity.PER_ELEMENT  # LEGACY keeps none without TTL
    assert export(materializer, stamps) == export(model, stamps)


def test_in_place_undo_reverts_a_change_interrupted_between_its_lists() -> None:
    """An interrupt can land between two list operations of one change: undo still restores
    exactly the record before the change."""
    undo = value_heap._RecordUndo()
    original = [[("a",), ("b",), ("c",)], [1, 2, 3], [b"a", b"b", b"c"], {b"a": 1, b"b": 1, b"c": 1}]
    for done in range(4):  # a removal of element 1 interrupted after ``done`` of its 3 deletes
        record = [list(part) for part in original[:3]] + [dict(original[3])]  # type: ignore[call-overload]
        for part in record[:done]:
            del part[1]
        undo.undo(record, (2, 3, 1, ("b",), 2, b"b"), None)
        assert record == original
    for done in range(4):  # an append interrupted after ``done`` of its 3 appends
        record = [list(part) for part in original[:3]] + [dict(original[3])]  # type: ignore[call-overload]
        for part, value in list(zip(record[:3], [("d",), 4, b"d"], strict=True))[:done]:
            part.append(value)
        undo.undo(record, (0, 3), None)
        assert record == original


def test_legacy_heap_undo_reverts_a_change_interrupted_between_its_lists() -> None:
    """LEGACY's heap record (rows, match keys, counts) too: an interrupted removal or append
    is undone exactly."""
    undo = legacy_heap._LegacyUndo()
    original = [[("a",), ("b",), ("c",)], [b"a", b"b", b"c"], {b"a": 1, b"b": 1, b"c": 1}]
    for done in range(3):  # a removal of row 1 interrupted after ``done`` of its 2 deletes
        record = [list(part) for part in original[:2]] + [dict(original[2])]  # type: ignore[call-overload]
        for part in record[:done]:
            del part[1]
        undo.undo(record, (3, 1, ("b",), b"b"), None)
        assert record == original
    for done in range(3):  # an append interrupted after ``done`` of its 2 appends
        record = [list(part) for part in original[:2]] + [dict(original[2])]  # type: ignore[call-overload]
        for part, value in list(zip(record[:2], [("d",), b"d"], strict=True))[:done]:
            part.append(value)
        undo.undo(record, 3, None)
        assert record == original


def test_whole_row_undo_reverts_a_change_interrupted_between_its_lists() -> None:
    """Without an upsert key a heap record's match keys may be its rows list itself (VALUE:
    ``[rows, stamps, rows]``, LEGACY: ``[rows, rows]``): an interrupted removal or append is
    undone exactly, the shared list changed once."""
    rows = [("a",), ("b",), ("c",)]
    for done in range(3):  # VALUE: a removal of element 1 interrupted after ``done`` of its 2 pops
        record: list[Any] = [list(rows), [1, 2, 3]]
        record.append(record[0])
        for part in record[:done]:
            del part[1]
        value_heap._RecordUndo().undo(record, (2, 3, 1, ("b",), 2, ("b",)), None)
        assert record == [rows, [1, 2, 3], rows] and record[2] is record[0]
        record[0].append(("d",))  # an append interrupted after the rows list
        value_heap._RecordUndo().undo(record, 3, None)
        assert record == [rows, [1, 2, 3], rows] and record[2] is record[0]
    for done in range(2):  # LEGACY: the same removal after ``done`` of its 1 pop
        record = [list(rows)]
        record.append(record[0])
        if done:
            del record[0][1]
        legacy_heap._LegacyUndo().undo(record, (3, 1, ("b",), ("b",)), None)
        assert record == [rows, rows] and record[1] is record[0]


def conflict_stream() -> list[Change | int]:
    """Changes and watermarks (ints) for ON CONFLICT: cancellations (rule C1), conflicts (two
    live rows at a watermark), retractions that match nothing at a compaction, deletions of
    the current row, stale watermarks."""
    return [
        insert(1, 1, "a"),
        insert(2, 1, "x"),
        update_before(1, 1, "a"),  # cancels the pending +I (C1)
        update_after(1, 2, "b"),
        10,
        insert(2, 2, "y"),  # a second live row of key 2: a conflict at the next watermark
        update_before(9, 9, "none"),  # a miss at the compaction
        update_after(1, 3, "c"),
        update_before(1, 2, "b"),
        20,
        20,  # not newer: no watermark
        delete(1, 3, "c"),  # empties key 1
        insert(3, 1, "z"),
        insert(3, 1, "z"),  # duplicates
        35,
        update_before(3, 1, "z"),
        36,
    ]


def conflict_state(materializer: Any) -> list[tuple[bytes, Any, Any]]:
    """Every key holding state: (context, current row, pending changes after rule C1)."""
    if isinstance(materializer, ConflictModel):
        items = [
            (context, materializer.current.get(context), materializer.pending.get(context, []))
            for context in set(materializer.current) | set(materializer.pending)
        ]
    else:
        items = list(materializer.export_keys())
    return sorted(
        (context, current, [(is_add, tuple(row)) for is_add, row in pending])
        for context, current, pending in items
        if current is not None or pending
    )


CONFLICT_CASES = [
    pytest.param(backend, behavior, upsert, interval,
                 id=f"{behavior.value}-{backend.value}-{'uk' if upsert else 'row'}-every{interval}")
    for backend in BACKENDS
    for behavior in (ConflictBehavior.NOTHING, ConflictBehavior.ERROR)
    for upsert in (True, False)
    for interval in ((1,) if backend is Backend.HEAP else (1, 7, 1000))
]  # fmt: skip


@pytest.mark.parametrize(("backend", "behavior", "upsert", "interval"), CONFLICT_CASES)
def test_on_conflict_rolls_back_a_failed_input_or_watermark(
    backend: Backend, behavior: ConflictBehavior, upsert: bool, interval: int, tmp_path: Path
) -> None:
    """The compacting materializer (ON CONFLICT DO NOTHING | ERROR, conflicts skipped) under
    the same injection: after a failure at any state access or at the commit of a change or a
    watermark, its state, last watermark, miss counter, collected conflicts and pending output
    are as before; in the end it emits exactly what the model emits."""
    keys = Keys(pk=(0,), upsert_key=(1,) if upsert else ())
    settings = Settings(backend=backend, conflict=behavior, checkpoint_interval=interval,
                        state_dir=None if backend is Backend.HEAP else tmp_path)  # fmt: skip
    counting = CountingBackend(open_backend(settings))
    counters = FailingCounters()
    counting.counters = counters
    materializer = CompactingMaterializer(keys, counting, behavior)
    materializer.skip_conflicts = True
    model = ConflictModel(keys, behavior, skip_conflicts=True)
    failures = 0

    def seen() -> tuple[object, ...]:
        return (conflict_state(materializer), materializer.last_watermark, materializer.retract_misses,
                len(materializer.conflicts))  # fmt: skip

    try:
        for step, item in enumerate(conflict_stream()):
            before = seen()
            assert before == (conflict_state(model), model.last_watermark, model.retract_misses,
                              len(model.conflicts)), f"step {step}"  # fmt: skip
            budget = 1
            while True:
                counters.reset()
                counters.budget = budget
                try:
                    if isinstance(item, int):
                        materializer.advance_time(item)
                    else:
                        materializer.process(item)
                except InjectedFailure:
                    failures += 1
                    counters.budget = None
                    assert seen() == before, f"step {step}: failure at step {budget} left a trace"
                    assert materializer.take_emitted() == [], f"step {step}: a failed watermark emitted"
                    budget += 1
                    continue
                counters.budget = None
                break
            expected: list[Change] = []
            if isinstance(item, int):
                expected = model.advance_time(item)
            else:
                model.process(item)
            assert materializer.take_emitted() == expected, f"step {step}"
        assert materializer.conflicts == model.conflicts
        assert any(model.conflicts) == (behavior is ConflictBehavior.ERROR)
    finally:
        materializer.close()
    assert failures > len(conflict_stream())  # the injection really hit state accesses
    if backend is Backend.HEAP:
        return
    reopened = CompactingMaterializer(
        keys, open_backend(replace(settings, checkpoint_interval=None)), behavior
    )
    try:
        assert conflict_state(reopened) == conflict_state(model)
        assert reopened.last_watermark == model.last_watermark
    finally:
        reopened.close()
