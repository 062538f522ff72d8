"""Match keys as tokens on heap (an int upsert-key column is its own match key): rows whose
upsert-key values differ in type but share canonical bytes match, and no others do.

The heap variants keep match keys as tokens (``KeyEncoder.use_tokens``); every other
implementation keeps the bytes. Both must give the model's outputs, with ``process`` and
with ``process_many``, on values at the edges of the token path.
"""

from __future__ import annotations

from enum import IntEnum

import pytest

from upsertmat.impls import Settings, available, create_named
from upsertmat.impls.strategies.common import StrategyBase
from upsertmat.spec import Change, Keys, delete, insert, update_after, update_before

from .support import lockstep

ALL = [f"{strategy.value}/{backend.value}" for strategy, backend in available()]
UPSERT_KEY = Keys(pk=(0,), upsert_key=(1,))


class Level(IntEnum):
    """An int subclass: canonically the int it stands for."""

    FIVE = 5


def stream() -> list[Change]:
    big = 2**62  # just past the token range: the bytes path
    return [
        insert(0, Level.FIVE, "a"),
        update_after(0, 7, "b"),
        update_after(0, big, "c"),
        update_after(0, big - 1, "d"),
        update_after(0, True, "e"),
        update_after(0, 5.0, "f"),
        update_after(0, "5", "g"),
        update_after(0, 5, "a2"),  # replaces Level.FIVE's row in place (the same match key)
        update_before(0, 1, "x"),  # a miss: True is not 1
        update_before(0, big, "c"),
        update_after(0, big, "c2"),
        update_before(0, Level.FIVE, "a2"),  # retracts the int 5's row
        delete(0, True, "e"),
        update_before(0, 5.0, "f"),
        update_before(0, "5", "g"),
        update_before(0, big - 1, "d"),
        update_before(0, 2**62, "c2"),
        delete(0, 7, "b"),  # empties the key
        insert(1, -(2**62) + 1, "h"),
        update_before(1, -(2**62) + 1, "h"),
    ]


@pytest.mark.parametrize("name", ALL)
def test_upsert_key_values_match_by_their_canonical_bytes(name: str) -> None:
    settings = Settings(threshold_high=3, threshold_low=1)  # ADAPTIVE converts on the way
    changes = stream()
    materializer = create_named(name, UPSERT_KEY, settings)
    try:
        lockstep(materializer, UPSERT_KEY, changes)
        assert isinstance(materializer, StrategyBase)
        materializer._check()
    finally:
        materializer.close()
    batched = create_named(name, UPSERT_KEY, settings)
    try:
        single = create_named(name, UPSERT_KEY, settings)
        try:
            assert batched.process_many(changes) == [single.process(change) for change in changes]  # type: ignore[attr-defined]
            assert batched.retract_misses == single.retract_misses == 1
        finally:
            single.close()
    finally:
        batched.close()
