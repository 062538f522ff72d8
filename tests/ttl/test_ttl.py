"""TTL: the hand-written scenarios hold for the model; state shrinks; export/import round trips."""

from __future__ import annotations

import pytest

from upsertmat.conformance.generators import Advance
from upsertmat.conformance.scenarios import TTL_SCENARIOS, TtlScenario
from upsertmat.impls import Settings, create_named, implementation_names
from upsertmat.spec import (
    Granularity,
    Keys,
    MissingTimestampError,
    ModelMaterializer,
    StateTransfer,
    TimeDomain,
    TtlSettings,
    insert,
)

KEYS = Keys(pk=(0,))


@pytest.mark.parametrize("scenario", TTL_SCENARIOS, ids=[scenario.name for scenario in TTL_SCENARIOS])
def test_scenarios_are_the_model(scenario: TtlScenario) -> None:
    model = ModelMaterializer(scenario.keys, scenario.ttl, scenario.granularity)
    for step, expected in zip(scenario.steps, scenario.expected, strict=True):
        if isinstance(step, Advance):
            model.advance_time(step.time)
        else:
            assert model.process(step) == expected, step
    assert model.retract_misses == scenario.misses


def test_event_time_without_ts_is_an_error_before_any_change() -> None:
    model = ModelMaterializer(KEYS, TtlSettings(ttl_ms=5, time_domain=TimeDomain.EVENT_TIME))
    with pytest.raises(MissingTimestampError, match='"ts"'):
        model.process(insert(1, "a"))
    assert list(model.histories()) == []


@pytest.mark.parametrize("name", implementation_names())
def test_untouched_keys_are_reclaimed_and_stats_shrink(name: str) -> None:
    """1000 keys written once and never again: after the TTL every one is physically gone."""
    materializer = create_named(name, KEYS, Settings(ttl=TtlSettings(ttl_ms=100)))
    try:
        for key in range(1000):
            materializer.advance_time(key // 10)
            materializer.process(insert(key, "a"))
            materializer.process(insert(key, "b"))
        assert materializer.stats()["keys"] == 1000  # type: ignore[attr-defined]
        materializer.advance_time(150)  # keys written at 0..50 expire
        stats = materializer.stats()  # type: ignore[attr-defined]
        assert stats["keys"] == 490 and stats["elements"] == 980
        materializer.advance_time(10_000)
        assert materializer.stats() == {"keys": 0, "elements": 0, "timers": 0}  # type: ignore[attr-defined]
    finally:
        materializer.close()


@pytest.mark.parametrize("name", implementation_names())
def test_export_import_round_trips_stamps_and_clock(name: str) -> None:
    ttl = TtlSettings(ttl_ms=50, time_domain=TimeDomain.EVENT_TIME)
    granularity = Granularity.PER_KEY if name.startswith("LEGACY") else Granularity.PER_ELEMENT
    model = ModelMaterializer(KEYS, ttl, granularity)
    source = create_named(name, KEYS, Settings(ttl=ttl))
    target = create_named(name, KEYS, Settings(ttl=ttl))
    try:
        assert isinstance(source, StateTransfer) and isinstance(target, StateTransfer)
        for i in range(40):
            change = insert(i % 7, f"r{i % 3}", ts=i * 3)
            model.process(change)
            source.process(change)
        model.advance_time(60)
        source.advance_time(60)
        exported = list(source.export_elements())
        assert exported == list(model.export_elements())
        target.import_elements(exported, source.now)
        assert list(target.export_elements()) == exported and target.now == 60
        for i in range(40, 80):
            change = insert(i % 9, f"r{i % 3}", ts=i * 3)
            assert target.process(change) == model.process(change)
            target.advance_time(i * 2)
            model.advance_time(i * 2)
        assert list(target.export_elements()) == list(model.export_elements())
    finally:
        source.close()
        target.close()
