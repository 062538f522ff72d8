"""Shared helpers of the lifecycle tests: seeded streams and running implementations."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

from upsertmat.impls import Settings, available, create_named
from upsertmat.spec import Change, Keys, Materializer, ModelMaterializer, Row, RowKind

IMPLEMENTATIONS = [f"{strategy.value}/{backend.value}" for strategy, backend in available()]
NO_UPSERT_KEY = Keys(pk=(0,))
UPSERT_KEY = Keys(pk=(0,), upsert_key=(1,))
SMALL_THRESHOLDS = Settings(threshold_high=4, threshold_low=2)


def make(name: str, keys: Keys, settings: Settings = SMALL_THRESHOLDS) -> Materializer:
    """The implementation ``name`` (ADAPTIVE with small thresholds so it converts often)."""
    return create_named(name, keys, replace(settings))


def mixed_stream(seed: int, length: int, keys: Keys, pks: int = 5) -> list[Change]:
    """Adds, replacements, duplicates and retractions (hits, first occurrences, misses).

    Rows are ``(pk, uk, level, payload)`` with few values, so histories grow, upsert keys
    repeat and retractions often match a non-last element.
    """
    rnd = random.Random(seed)
    live: list[Row] = []
    changes: list[Change] = []
    for step in range(length):
        if live and rnd.random() < 0.4:
            row = live.pop(rnd.randrange(len(live)))
            if keys.has_upsert_key and rnd.random() < 0.3:
                row = (row[0], row[1], row[2], "other")
            changes.append(Change(rnd.choice((RowKind.UPDATE_BEFORE, RowKind.DELETE)), row))
        elif rnd.random() < 0.05:
            changes.append(Change(RowKind.DELETE, (rnd.randrange(pks), 9, 9, "never")))
        else:
            row = (rnd.randrange(pks), rnd.randrange(3), rnd.randrange(2), f"v{step % 4}")
            live.append(row)
            changes.append(Change(rnd.choice((RowKind.INSERT, RowKind.UPDATE_AFTER)), row))
    return changes


def outputs(materializer: Materializer, changes: Sequence[Change]) -> list[Change | None]:
    """What ``materializer`` emits for each change, in order."""
    return [materializer.process(change) for change in changes]


def model_outputs(keys: Keys, changes: Sequence[Change]) -> list[Change | None]:
    """The model's outputs for ``changes``."""
    model = ModelMaterializer(keys)
    return outputs(model, changes)
