"""Async state (``table.exec.async-state.enabled``): outputs, stamps and state of sync mode.

Batches prefetch their reads; everything observable must stay the synchronous mode's:
outputs in input order, ``retract_misses``, histories, TTL stamps and expiry, and the stored
state itself (a state directory written with async state on continues with it off, and the
other way round, with TTL off and on).
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from upsertmat.impls import Settings, available, create_named
from upsertmat.impls.config import ASYNC_STATE, build_settings
from upsertmat.impls.settings import Backend, Strategy
from upsertmat.spec import (
    Change,
    Granularity,
    Keys,
    ModelMaterializer,
    TimeDomain,
    TtlSettings,
    process_many,
)
from upsertmat.spec.contract import HistoryAccess, StateTransfer

from .support import NO_UPSERT_KEY, SMALL_THRESHOLDS, UPSERT_KEY, opened, tolerated, upsert_interleavings

ALL = [f"{strategy.value}/{backend.value}" for strategy, backend in available()]
BYTE = [name for name in ALL if not name.endswith("/heap")]
ASYNC = replace(SMALL_THRESHOLDS, async_state=True)
BOTH_KEYS = pytest.mark.parametrize("keys", [NO_UPSERT_KEY, UPSERT_KEY], ids=["no-uk", "uk"])


def granularity(name: str) -> Granularity:
    return Granularity.PER_KEY if name.startswith("LEGACY/") else Granularity.PER_ELEMENT


def test_the_configuration_key() -> None:
    assert build_settings([("test", {ASYNC_STATE: "true"})]).async_state is True
    assert build_settings([("test", {ASYNC_STATE: False})]).async_state is False
    assert Settings().async_state is False
    with pytest.raises(ValueError, match="true or false"):
        build_settings([("test", {ASYNC_STATE: "maybe"})])


@pytest.mark.parametrize("name", ALL)
@BOTH_KEYS
def test_outputs_and_histories_equal_the_model(name: str, keys: Keys) -> None:
    rnd = random.Random(11)
    changes = tolerated(rnd, 1500, pks=40) + upsert_interleavings(rnd, 300)  # > one batch
    model = ModelMaterializer(keys)
    expected = model.process_many(changes)
    with opened(name, keys, ASYNC) as materializer:
        out: list[Change | None] = []
        for size in (1, 7, 1200, 10_000):  # single inputs, small batches, one over a batch
            out.clear()
            materializer.close()
            materializer = create_named(name, keys, ASYNC)
            process_many(materializer, changes[:size], out)
            process_many(materializer, changes[size:], out)
            assert out == expected, f"batch size {size}"
            assert materializer.retract_misses == model.retract_misses
            assert isinstance(materializer, StateTransfer)
            assert dict(materializer.export_elements()) == dict(model.export_elements())


TTLS = [
    TtlSettings(ttl_ms=6),
    TtlSettings(ttl_ms=6, time_domain=TimeDomain.EVENT_TIME),
]


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("ttl", TTLS, ids=["processing-time", "event-time"])
def test_ttl_stamps_and_expiry_equal_the_model(name: str, ttl: TtlSettings) -> None:
    keys = UPSERT_KEY
    rnd = random.Random(3)
    changes = tolerated(rnd, 600, pks=6)
    model = ModelMaterializer(keys, ttl, granularity(name))
    with opened(name, keys, replace(ASYNC, ttl=ttl)) as materializer:
        now = 0
        for start in range(0, len(changes), 25):
            chunk = [replace(change, ts=now + rnd.randrange(-3, 3)) for change in changes[start : start + 25]]
            assert process_many(materializer, chunk) == model.process_many(chunk), f"chunk at {start}"
            now += rnd.randrange(0, 4)
            model.advance_time(now)
            materializer.advance_time(now)
            assert isinstance(materializer, StateTransfer)
            assert dict(materializer.export_elements()) == dict(model.export_elements())


@pytest.mark.parametrize("name", BYTE)
@pytest.mark.parametrize("first_async", [True, False], ids=["async-then-sync", "sync-then-async"])
@pytest.mark.parametrize("ttl", [TtlSettings(), TtlSettings(ttl_ms=8)], ids=["no-ttl", "ttl"])
def test_a_state_directory_moves_between_async_and_sync(
    name: str, first_async: bool, ttl: TtlSettings, tmp_path: Path
) -> None:
    keys = UPSERT_KEY
    rnd = random.Random(5)
    changes = tolerated(rnd, 400, pks=8)
    model = ModelMaterializer(keys, ttl, granularity(name))
    settings = replace(SMALL_THRESHOLDS, ttl=ttl, state_dir=tmp_path)
    now = 0
    for run, part in enumerate((changes[:200], changes[200:])):
        use_async = first_async if run == 0 else not first_async
        materializer = create_named(name, keys, replace(settings, async_state=use_async))
        try:
            materializer.advance_time(now)  # the clock a rerun restores (replay keeps it)
            for start in range(0, len(part), 40):
                chunk = part[start : start + 40]
                assert process_many(materializer, chunk) == model.process_many(chunk)
                now += 2
                model.advance_time(now)
                materializer.advance_time(now)
            assert isinstance(materializer, StateTransfer)
            if ttl.enabled:
                assert dict(materializer.export_elements()) == dict(model.export_elements())
            else:  # without TTL, LEGACY keeps no stamps
                assert isinstance(materializer, HistoryAccess)
                assert dict(materializer.histories()) == dict(model.histories())
        finally:
            materializer.close()


def test_async_on_heap_legacy_still_batches() -> None:
    keys = NO_UPSERT_KEY
    settings = Settings(strategy=Strategy.LEGACY, backend=Backend.HEAP, async_state=True)
    changes = tolerated(random.Random(1), 200)
    materializer = create_named("LEGACY/heap", keys, settings)
    try:
        assert process_many(materializer, changes) == ModelMaterializer(keys).process_many(changes)
    finally:
        materializer.close()
