"""``_check()``: the layout invariants hold after real streams and catch damaged state.

Every implementation passes its check after each input of seeded streams (the conformance
state machine also calls it after every step); a hand-damaged state of each layout fails it.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from upsertmat.impls import Settings, available
from upsertmat.impls.strategies.common import LayoutError, StrategyBase
from upsertmat.impls.strategies.linked_map import SIZE
from upsertmat.spec import Change, Keys

from .support import NO_UPSERT_KEY, UPSERT_KEY, long_history, opened, tolerated, upsert_interleavings

ALL = [f"{strategy.value}/{backend.value}" for strategy, backend in available()]


def checked(materializer: object, changes: list[Change]) -> StrategyBase:
    assert isinstance(materializer, StrategyBase)
    for change in changes:
        materializer.process(change)
        materializer._check()
    return materializer


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("keys", [NO_UPSERT_KEY, UPSERT_KEY], ids=["no-uk", "uk"])
def test_invariants_hold_after_every_input(name: str, keys: Keys) -> None:
    rnd = random.Random(5)
    streams = [tolerated(rnd, 120), long_history(rnd, 30)]
    if keys is UPSERT_KEY:
        streams.append(upsert_interleavings(rnd, 120))
    for changes in streams:
        with opened(name, keys) as materializer:
            checked(materializer, changes)


def damage(name: str, materializer: StrategyBase, context: bytes) -> None:
    """Break one invariant of the layout of ``name`` at ``context``."""
    backend = materializer.backend
    strategy = name.split("/")[0]
    if strategy == "LEGACY":
        backend.value_state("legacy").put(context, [])
    elif strategy == "VALUE":
        record: Any = backend.value_state("value").get(context)
        record[2][0] = b"not a match key"
        backend.value_state("value").put(context, record)
    elif strategy in ("MAP", "ADAPTIVE"):
        state = backend.value_state("meta" if strategy == "MAP" else "adaptive")
        meta: Any = state.get(context)
        meta[SIZE] += 1
        state.put(context, meta)
    elif strategy == "SORTED":
        index = backend.map_state("index")
        key, _ = next(iter(index.items(context)))
        index.delete(context, key)
    backend.commit()


@pytest.mark.parametrize("name", ALL)
def test_a_damaged_layout_fails_the_check(name: str) -> None:
    keys = NO_UPSERT_KEY
    # Small ADAPTIVE thresholds: the key is in MAP mode after 6 rows.
    with opened(name, keys, Settings(threshold_high=4, threshold_low=2)) as materializer:
        changes = long_history(random.Random(1), 6)[:6]  # the six adds
        base = checked(materializer, changes)
        context = next(context for context, _ in base.histories())
        damage(name, base, context)
        with pytest.raises(LayoutError, match="context key"):
            base._check()
