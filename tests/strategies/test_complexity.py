"""Complexity pinned by counting, not timing (issue 3).

MAP and SORTED: the state reads and writes of each kind of event are the same on a key
holding 10 rows and on one holding 10,000 (a small constant), no entries are scanned, and
exactly one match key (the incoming row's) is computed. LEGACY: the match keys computed (rows
scanned) and the bytes moved per event grow with the history.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import msgpack
import pytest

from upsertmat.impls import Settings
from upsertmat.impls.state import CountingBackend, HeapBackend
from upsertmat.impls.strategies import MapMaterializer, SortedMaterializer, StrategyBase
from upsertmat.impls.strategies.adaptive import AdaptiveMaterializer
from upsertmat.impls.strategies.legacy import LegacyMaterializer
from upsertmat.impls.strategies.variants import HEAP_VARIANTS as TWINS
from upsertmat.impls.strategies.variants import build
from upsertmat.spec import (
    CanonicalEqualizer,
    Change,
    JsonValue,
    Keys,
    Row,
    delete,
    insert,
    update_after,
    update_before,
)

SMALL, LARGE = 10, 10_000
MAX_ACCESSES = 10  # reads + writes of any single event on MAP or SORTED


class CountingEqualizer(CanonicalEqualizer):
    """The default equalizer, counting how many match keys it computes (rows looked at)."""

    def __init__(self) -> None:
        self.calls = 0

    def normalize(self, values: Sequence[JsonValue]) -> bytes:
        self.calls += 1
        return super().normalize(values)


def history(size: int) -> list[Row]:
    """Distinct rows 0..size-1 on context key 0 (upsert key: column 1)."""
    return [(0, i, "p") for i in range(size)]


def probes(size: int, upsert: bool) -> list[tuple[str, Change]]:
    """One event of each kind, applied in this order to a key holding ``history(size)``."""
    middle = size // 2
    steps = [
        ("append", insert(0, size, "p")),
        ("retract the tail (rule 9)", update_before(0, size, "p")),
        ("retract the head", delete(0, 0, "p")),
        ("retract a middle row (rule 10)", update_before(0, middle, "p")),
        ("retraction miss (rule 7)", delete(0, -1, "p")),
    ]
    if upsert:
        steps += [
            ("replace the head in place (rule 4)", update_after(0, 1, "q")),
            ("replace a middle row in place", update_after(0, middle + 1, "q")),
        ]
    else:
        steps += [
            ("append a duplicate of a middle row", insert(0, middle + 1, "p")),
            ("retract its first occurrence", update_before(0, middle + 1, "p")),
            ("append a duplicate of the tail", insert(0, size - 1, "p")),
            ("retract the tail's first occurrence", delete(0, size - 1, "p")),
        ]
    return steps


Build = Callable[[Keys, CountingBackend, Settings], StrategyBase]
FAST: dict[str, Build] = {
    "MAP": lambda keys, backend, settings: MapMaterializer(keys, backend, settings),
    "SORTED": lambda keys, backend, settings: SortedMaterializer(keys, backend, settings),
    "ADAPTIVE in MAP mode": lambda keys, backend, settings: AdaptiveMaterializer(
        keys, backend, replace(settings, threshold_high=5, threshold_low=2)
    ),
}
# Rule-7 explanations off: what a miss costs with them is pinned on its own (below).
QUIET = Settings(miss_rows=0)


def measure_fast(
    build: Build, size: int, upsert: bool, settings: Settings = QUIET
) -> list[tuple[str, int, int, int, int]]:
    """(probe, reads, writes, scanned, match keys computed) of each probe on ``size`` rows."""
    equalizer = CountingEqualizer()
    keys = Keys(pk=(0,), upsert_key=(1,) if upsert else (), equalizer=equalizer)
    backend = CountingBackend(HeapBackend())
    materializer = build(keys, backend, settings)
    materializer.load_histories([(keys.context_key((0,)), history(size))])
    counts = []
    for name, change in probes(size, upsert):
        backend.counters.reset()
        equalizer.calls = 0
        materializer.process(change)
        counters = backend.counters
        assert counters.commits == 1, name
        counts.append((name, counters.reads, counters.writes, counters.scanned, equalizer.calls))
    materializer.close()
    return counts


@pytest.mark.parametrize("upsert", [False, True], ids=["no-upsert-key", "upsert-key"])
@pytest.mark.parametrize("strategy", list(FAST))
def test_fast_strategies_do_constant_work_per_event(strategy: str, upsert: bool) -> None:
    small = measure_fast(FAST[strategy], SMALL, upsert)
    large = measure_fast(FAST[strategy], LARGE, upsert)
    assert large == small  # the same accesses, event by event, at 10 and 10,000 rows
    for name, reads, writes, scanned, match_keys in large:
        assert reads + writes <= MAX_ACCESSES, name
        assert scanned == 0, name
        assert match_keys == 1, name  # only the incoming row's; no stored row is looked at


MISS = "retraction miss (rule 7)"


@pytest.mark.parametrize("upsert", [False, True], ids=["no-upsert-key", "upsert-key"])
@pytest.mark.parametrize("strategy", list(FAST))
def test_miss_explanations_cost_nothing_on_matches_and_a_bounded_read_on_a_miss(
    strategy: str, upsert: bool
) -> None:
    """With ``upsertmat.misses.max-rows`` N, every input that matches a stored row makes exactly
    the accesses it makes with explanations off; a miss reads at most N more (the newest rows of
    its own key, each once), the same on a key of 10,000 rows as on one of 100."""
    rows = 7
    explaining = Settings(miss_rows=rows)
    for size in (100, LARGE):
        quiet = measure_fast(FAST[strategy], size, upsert)
        loud = measure_fast(FAST[strategy], size, upsert, explaining)
        assert [probe for probe in loud if probe[0] != MISS] == [probe for probe in quiet if probe[0] != MISS]
        (_, quiet_reads, *quiet_rest), (_, loud_reads, *loud_rest) = (
            next(probe for probe in measured if probe[0] == MISS) for measured in (quiet, loud)
        )
        assert loud_rest == quiet_rest  # no writes, no scans, no match keys more
        # the meta (or the tail seek), then one read per row; SORTED's seek finds the row before
        assert rows <= loud_reads - quiet_reads <= rows + 2, (size, quiet_reads, loud_reads)
    assert measure_fast(FAST[strategy], 100, upsert, explaining) == measure_fast(
        FAST[strategy], LARGE, upsert, explaining
    )


class JournalCountingHeap(HeapBackend):
    """A heap backend recording how many undo records (one per write) each commit ends."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    def commit(self) -> None:
        self.writes.append(len(self.journal))
        super().commit()


HEAP_VARIANTS: dict[str, tuple[type[StrategyBase], Settings]] = {
    "LEGACY": (LegacyMaterializer, Settings()),  # its heap record keeps each row's match key
    "MAP": (MapMaterializer, Settings()),
    "SORTED": (SortedMaterializer, Settings()),
    # thresholds that keep both history sizes in MAP mode through every probe
    "ADAPTIVE": (AdaptiveMaterializer, Settings(threshold_high=5, threshold_low=2)),
}


def measure_heap_variant(strategy: str, size: int, upsert: bool) -> list[tuple[str, int, int]]:
    """(probe, writes, match keys computed) of each probe on ``size`` rows, on the strategy's
    heap variant (the heap dicts written directly: the journal counts its writes)."""
    equalizer = CountingEqualizer()
    keys = Keys(pk=(0,), upsert_key=(1,) if upsert else (), equalizer=equalizer)
    backend = JournalCountingHeap()
    cls, settings = HEAP_VARIANTS[strategy]
    materializer = build(cls, keys, backend, settings)
    assert type(materializer) is TWINS[cls], type(materializer)  # the table's specialisation
    materializer.load_histories([(keys.context_key((0,)), history(size))])
    counts = []
    for name, change in probes(size, upsert):
        backend.writes.clear()
        equalizer.calls = 0
        materializer.process(change)
        assert len(backend.writes) == 1, name
        counts.append((name, backend.writes[0], equalizer.calls))
    materializer._check()
    materializer.close()
    return counts


@pytest.mark.parametrize("upsert", [False, True], ids=["no-upsert-key", "upsert-key"])
@pytest.mark.parametrize("strategy", list(HEAP_VARIANTS))
def test_heap_variants_do_constant_work_per_event(strategy: str, upsert: bool) -> None:
    """The heap variants (LEGACY, MAP, SORTED, ADAPTIVE in MAP mode) bypass the counted state interface:
    their writes per event, counted in the undo journal, and the match keys they compute are
    the same at 10 and 10,000 rows."""
    small = measure_heap_variant(strategy, SMALL, upsert)
    large = measure_heap_variant(strategy, LARGE, upsert)
    assert large == small
    for name, writes, match_keys in large:
        assert writes <= MAX_ACCESSES, name
        assert match_keys == 1, name


def measure_legacy(size: int) -> list[tuple[str, int, int]]:
    """(probe, match keys computed, bytes read + written) of each LEGACY probe on ``size`` rows."""
    equalizer = CountingEqualizer()
    keys = Keys(pk=(0,), equalizer=equalizer)
    backend = HeapBackend()
    materializer = LegacyMaterializer(keys, backend)
    context = keys.context_key((0,))
    materializer.load_histories([(context, history(size))])
    state = backend.value_state("legacy")
    work = []
    for name, change in probes(size, upsert=False):
        before = len(msgpack.packb(state.get(context)))
        equalizer.calls = 0
        materializer.process(change)
        after = len(msgpack.packb(state.get(context)))
        work.append((name, equalizer.calls, before + after))
    materializer.close()
    return work


def test_legacy_work_grows_with_the_history() -> None:
    small, large = measure_legacy(SMALL), measure_legacy(LARGE)
    for (name, small_scanned, small_bytes), (_, large_scanned, large_bytes) in zip(small, large, strict=True):
        assert large_bytes > 500 * small_bytes / 10, name  # the whole list moves on every event
        if name.startswith("retract") and name != "retract the head":
            assert large_scanned > 100 * small_scanned, name  # a scan to the matching row
    # Retracting the tail scans the whole list: every stored row's match key is computed.
    assert dict((name, scanned) for name, scanned, _ in large)["retract the tail (rule 9)"] > LARGE
