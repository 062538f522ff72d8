"""ADAPTIVE: thresholds, conversions in both directions, order/duplicates/stamps preserved."""

from __future__ import annotations

import itertools
import random

import pytest

from upsertmat.impls import Backend, Settings, Strategy, build_settings, create, create_named
from upsertmat.impls.config import STRATEGY, THRESHOLD_HIGH, THRESHOLD_LOW, UnsupportedSetting
from upsertmat.impls.strategies import AdaptiveMaterializer, thresholds
from upsertmat.spec import Change, Keys, ModelMaterializer, Row, RowKind

from .support import ADDS, IMPLEMENTATIONS, NO_UPSERT_KEY, RETRACTS, UPSERT_KEY, StampedHistories

ADAPTIVE = [name for name in IMPLEMENTATIONS if name.startswith("ADAPTIVE/")]
BOTH_KEYS = pytest.mark.parametrize("keys", [NO_UPSERT_KEY, UPSERT_KEY], ids=["no-uk", "uk"])


def test_default_thresholds_per_backend() -> None:
    assert thresholds(Settings(backend=Backend.HEAP)) == (400, 300)
    assert thresholds(Settings(backend=Backend.ROCKSDB)) == (50, 40)
    assert thresholds(Settings(backend=Backend.LMDB)) == (50, 40)


def test_thresholds_from_flink_keys() -> None:
    settings = build_settings([("job", {STRATEGY: "adaptive", THRESHOLD_HIGH: "12", THRESHOLD_LOW: "5"})])
    materializer = create(UPSERT_KEY, settings)
    try:
        assert isinstance(materializer, AdaptiveMaterializer)
        assert (materializer.high, materializer.low) == (12, 5)
    finally:
        materializer.close()


def test_threshold_overrides_and_refusals() -> None:
    assert thresholds(Settings(threshold_high=10, threshold_low=3)) == (10, 3)
    assert thresholds(Settings(backend=Backend.ROCKSDB, threshold_high=100)) == (100, 40)
    with pytest.raises(UnsupportedSetting, match=r"high > threshold.low"):
        thresholds(Settings(threshold_high=9))  # the heap default low (300) is not below 9
    with pytest.raises(UnsupportedSetting):
        create(UPSERT_KEY, Settings(strategy=Strategy.ADAPTIVE, threshold_high=5, threshold_low=5))


def sawtooth(rnd: random.Random, keys: Keys, teeth: int, top: int, bottom: int) -> list[Change]:
    """One context key growing to ``top`` rows and shrinking to ``bottom``, ``teeth`` times.

    Rows repeat (duplicates without an upsert key; in-place replacements with one); each
    retraction removes a random live row (a first occurrence, often not the last).
    """
    changes: list[Change] = []
    live: list[Row] = []
    step = 0
    for _ in range(teeth):
        while len(live) < top:
            step += 1
            uk = step % 50 if keys.has_upsert_key else rnd.randrange(3)
            row: Row = (0, uk, 0, f"r{step}")
            changes.append(Change(rnd.choice(ADDS), row))
            live.append(row)
            if keys.has_upsert_key and rnd.random() < 0.3:  # replace a live row in place
                target = rnd.choice(live)
                replacement: Row = (0, target[1], 0, f"again{step}")
                changes.append(Change(RowKind.UPDATE_AFTER, replacement))
                live[live.index(target)] = replacement
        while len(live) > bottom:
            victim = live.pop(rnd.randrange(len(live)))
            changes.append(Change(rnd.choice(RETRACTS), victim))
    return changes


@pytest.mark.parametrize("name", ADAPTIVE)
@BOTH_KEYS
def test_crosses_thresholds_both_ways_keeping_order_duplicates_and_stamps(name: str, keys: Keys) -> None:
    high, low = 5, 2
    changes = sawtooth(random.Random(3), keys, teeth=12, top=8, bottom=1)
    model = ModelMaterializer(keys)
    stamped = StampedHistories(keys)
    modes: list[str | None] = []
    materializer = create_named(name, keys, Settings(threshold_high=high, threshold_low=low))
    try:
        assert isinstance(materializer, AdaptiveMaterializer)
        for now, change in enumerate(changes, start=1):
            materializer.advance_time(now * 10)
            assert materializer.process(change) == model.process(change), f"input {now - 1}"
            stamped.apply(change, now * 10)
            context = keys.context_key(change.row)
            assert materializer.elements(context) == stamped.elements.get(context, [])
            size = len(stamped.elements.get(context, []))
            mode = materializer.mode(context)
            if mode == "MAP":
                assert size > low
            elif mode == "VALUE":
                assert size < high
            modes.append(mode)
        assert materializer.retract_misses == 0
    finally:
        materializer.close()
    switches = list(itertools.pairwise(modes))
    assert switches.count(("VALUE", "MAP")) >= 12
    assert switches.count(("MAP", "VALUE")) >= 12


@pytest.mark.parametrize("name", ADAPTIVE)
def test_load_histories_picks_the_layout_by_size(name: str) -> None:
    rows: list[Row] = [(0, i % 3, 0, "x") for i in range(7)]
    materializer = create_named(name, NO_UPSERT_KEY, Settings(threshold_high=5, threshold_low=2))
    try:
        assert isinstance(materializer, AdaptiveMaterializer)
        context = NO_UPSERT_KEY.context_key(rows[0])
        materializer.load_histories([(context, rows)])
        assert materializer.mode(context) == "MAP"
        materializer.load_histories([(context, rows[:3])])
        assert materializer.mode(context) == "VALUE"
        assert dict(materializer.histories()) == {context: rows[:3]}
    finally:
        materializer.close()
