"""Per-element stamps on every strategy, negative-TTL refusal, SORTED's need for ordered iteration."""

from __future__ import annotations

import random

import pytest

from upsertmat.impls import Settings, TimeDomain, TtlSettings, create_named
from upsertmat.impls.config import UnsupportedSetting
from upsertmat.impls.state import HeapBackend
from upsertmat.impls.strategies import SortedMaterializer, StrategyBase
from upsertmat.spec import Change, Keys

from .support import IMPLEMENTATIONS, NO_UPSERT_KEY, UPSERT_KEY, StampedHistories, tolerated

BOTH_KEYS = pytest.mark.parametrize("keys", [NO_UPSERT_KEY, UPSERT_KEY], ids=["no-uk", "uk"])


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@BOTH_KEYS
def test_elements_carry_processing_time_stamps(name: str, keys: Keys) -> None:
    changes = tolerated(random.Random(5), 200, pks=2)
    stamped = StampedHistories(keys)
    materializer = create_named(name, keys, Settings(threshold_high=4, threshold_low=2))
    try:
        assert isinstance(materializer, StrategyBase)
        for now, change in enumerate(changes, start=1):
            materializer.advance_time(now * 7)
            materializer.advance_time(now)  # the clock never goes back
            materializer.process(change)
            stamped.apply(change, now * 7)
        for context, elements in stamped.elements.items():
            assert materializer.elements(context) == elements
    finally:
        materializer.close()


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_event_time_domain_stamps_with_the_change_ts(name: str) -> None:
    changes = [
        Change(change.kind, change.row, ts=1000 + i)
        for i, change in enumerate(tolerated(random.Random(9), 80))
    ]
    stamped = StampedHistories(UPSERT_KEY)
    settings = Settings(ttl=TtlSettings(time_domain=TimeDomain.EVENT_TIME), threshold_high=4, threshold_low=2)
    materializer = create_named(name, UPSERT_KEY, settings)
    try:
        assert isinstance(materializer, StrategyBase)
        for change in changes:
            materializer.process(change)
            assert change.ts is not None
            stamped.apply(change, change.ts)
        for context, elements in stamped.elements.items():
            assert materializer.elements(context) == elements
    finally:
        materializer.close()


def test_negative_ttl_is_refused_where_the_setting_is_made() -> None:
    """No strategy can be handed a negative TTL: TtlSettings refuses it."""
    with pytest.raises(ValueError, match=r"table\.exec\.state\.ttl must be >= 0"):
        TtlSettings(ttl_ms=-1)


class UnorderedHeap(HeapBackend):
    """A heap backend that does not offer ordered iteration (as a hash-only store would)."""

    supports_ordered = False


def test_sorted_refuses_a_backend_without_ordered_iteration() -> None:
    with pytest.raises(UnsupportedSetting, match="ordered iteration"):
        SortedMaterializer(UPSERT_KEY, UnorderedHeap())
