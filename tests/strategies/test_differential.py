"""VALUE, MAP, SORTED and ADAPTIVE against the model: exact output after every input.

Every registered (strategy, backend) pair of these strategies runs every seeded stream family
of ``strategies_support`` (docs/spec.md section 5 and rule 4), ADAPTIVE with small thresholds so its keys
convert between layouts many times.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from upsertmat.spec import Change, Keys, ModelMaterializer, insert, update_after, update_before
from upsertmat.spec.contract import HistoryAccess

from .support import (
    IMPLEMENTATIONS,
    NO_UPSERT_KEY,
    UPSERT_KEY,
    duplicates,
    lockstep,
    long_history,
    opened,
    tolerated,
    upsert_interleavings,
    valid_stream,
)

BOTH_KEYS = pytest.mark.parametrize("keys", [NO_UPSERT_KEY, UPSERT_KEY], ids=["no-uk", "uk"])


def seeds(name: str) -> range:
    """Seeds per stream family: more on heap, fewer where each event costs a database write."""
    return range(12) if name.endswith("/heap") else range(5)


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@BOTH_KEYS
def test_tolerated_streams(name: str, keys: Keys) -> None:
    for seed in seeds(name):
        with opened(name, keys) as materializer:
            lockstep(materializer, keys, tolerated(random.Random(seed), 150))


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@BOTH_KEYS
def test_valid_streams(name: str, keys: Keys) -> None:
    for seed in seeds(name):
        with opened(name, keys) as materializer:
            lockstep(materializer, keys, valid_stream(random.Random(seed), 80, keys))


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_upsert_key_append_replace_retract_interleavings(name: str) -> None:
    for seed in seeds(name):
        changes = upsert_interleavings(random.Random(seed), 200)
        with opened(name, UPSERT_KEY) as materializer:
            lockstep(materializer, UPSERT_KEY, changes)


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_duplicates_without_upsert_key(name: str) -> None:
    for seed in seeds(name):
        with opened(name, NO_UPSERT_KEY) as materializer:
            lockstep(materializer, NO_UPSERT_KEY, duplicates(random.Random(seed), 200))


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@BOTH_KEYS
def test_long_history(name: str, keys: Keys) -> None:
    with opened(name, keys) as materializer:
        lockstep(materializer, keys, long_history(random.Random(7), 600), histories_every=97)


def replace_non_last_then_retract(keys: Keys) -> list[Change]:
    """Key 1 first, others after it; 1 replaced in place twice, retracted, re-added, retracted."""
    return [
        insert(0, 1, 0, "a"),
        insert(0, 2, 0, "b"),
        insert(0, 3, 0, "c"),
        update_after(0, 1, 0, "a2"),  # rule 4: replaces the first (non-last) element in place
        update_after(0, 1, 0, "a3"),
        update_before(0, 1, 0, "stale"),  # rule 6: removes it (incoming payload differs)
        insert(0, 1, 0, "a4"),  # appended after 3
        update_after(0, 3, 0, "c2"),
        update_before(0, 3, 0, "c2"),  # middle element
        update_before(0, 1, 0, "a4"),  # the last: rule 9 rolls back to 2
        update_before(0, 2, 0, "x"),  # empties: rule 8 with the incoming row
    ]


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_replace_non_last_then_retract_pinned(name: str) -> None:
    changes = replace_non_last_then_retract(UPSERT_KEY)
    with opened(name, UPSERT_KEY) as materializer:
        model = lockstep(materializer, UPSERT_KEY, changes)
    assert model.retract_misses == 0


Stream = Callable[[random.Random, int], list[Change]]


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
@BOTH_KEYS
def test_load_histories_then_continue(name: str, keys: Keys) -> None:
    """Restoring the model's histories mid-stream continues with identical output."""
    for seed in range(4):
        rnd = random.Random(seed)
        first, second = tolerated(rnd, 120, pks=3), tolerated(rnd, 120, pks=3)
        model = ModelMaterializer(keys)
        for change in first:
            model.process(change)
        with opened(name, keys) as materializer:
            assert isinstance(materializer, HistoryAccess)
            materializer.load_histories(model.histories())
            assert dict(materializer.histories()) == dict(model.histories())
            for change in second:
                assert materializer.process(change) == model.process(change)
            assert dict(materializer.histories()) == dict(model.histories())
            materializer.load_histories([(context, []) for context, _ in model.histories()])
            assert list(materializer.histories()) == []
