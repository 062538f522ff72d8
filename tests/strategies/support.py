"""Seeded random streams and a lockstep checker for the strategy tests (docs/spec.md section 5 and rule 4).

Rows are ``(pk, uk, level, payload)``: sink PK column 0, upsert key column 1 when used.
Every generator is a plain function of a ``random.Random`` so failures reproduce by seed.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from upsertmat.impls import Settings, available, create_named
from upsertmat.impls.settings import Strategy
from upsertmat.spec import Change, JsonValue, Keys, Materializer, ModelMaterializer, Row, RowKind
from upsertmat.spec.contract import HistoryAccess

FAST = (Strategy.VALUE, Strategy.MAP, Strategy.SORTED, Strategy.ADAPTIVE)
IMPLEMENTATIONS = [
    f"{strategy.value}/{backend.value}" for strategy, backend in available() if strategy in FAST
]
NO_UPSERT_KEY = Keys(pk=(0,))
UPSERT_KEY = Keys(pk=(0,), upsert_key=(1,))
ADDS = (RowKind.INSERT, RowKind.UPDATE_AFTER)
RETRACTS = (RowKind.UPDATE_BEFORE, RowKind.DELETE)
# Small thresholds so ADAPTIVE keys convert often in both directions.
SMALL_THRESHOLDS = Settings(threshold_high=4, threshold_low=2)


@contextmanager
def opened(name: str, keys: Keys, settings: Settings = SMALL_THRESHOLDS) -> Iterator[Materializer]:
    """The implementation ``name``, closed on exit."""
    materializer = create_named(name, keys, replace(settings))
    try:
        yield materializer
    finally:
        materializer.close()


def lockstep(
    materializer: Materializer, keys: Keys, changes: Sequence[Change], *, histories_every: int = 1
) -> ModelMaterializer:
    """Feed ``changes`` to ``materializer`` and the model; assert equal output after every input.

    Also compares ``retract_misses`` after every input and the full histories every
    ``histories_every`` inputs and at the end. Returns the model.
    """
    model = ModelMaterializer(keys)
    assert isinstance(materializer, HistoryAccess)
    for position, change in enumerate(changes):
        expected = model.process(change)
        actual = materializer.process(change)
        assert actual == expected, f"input {position} {change!r}: got {actual!r}, model {expected!r}"
        assert materializer.retract_misses == model.retract_misses, f"input {position}: misses differ"
        if position % histories_every == 0:
            assert dict(materializer.histories()) == dict(model.histories()), f"input {position}"
    assert dict(materializer.histories()) == dict(model.histories())
    return model


def tolerated(rnd: random.Random, length: int, pks: int = 2) -> list[Change]:
    """Arbitrary ops over a tiny pool: misses, duplicates, ``+U`` into empty state."""
    values: list[JsonValue] = [0, 1, 1.0, True, "x"]
    changes = []
    for _ in range(length):
        row: Row = (rnd.randrange(pks), rnd.choice(values[:3]), rnd.randrange(2), rnd.choice(values))
        changes.append(Change(rnd.choice(list(RowKind)), row))
    return changes


def upsert_interleavings(rnd: random.Random, length: int, upsert_keys: int = 3) -> list[Change]:
    """The production-bug shape: few upsert keys appended, replaced in place and retracted
    between other keys — replacements of non-last elements, retractions of first occurrences.

    Retractions carry a payload different from the stored one half of the time (rule 8's
    ``-D`` must carry the incoming row).
    """
    changes = []
    live: set[int] = set()
    for step in range(length):
        uk = rnd.randrange(upsert_keys)
        payload = f"p{step}"
        if uk in live and rnd.random() < 0.45:
            live.discard(uk)
            kind = rnd.choice(RETRACTS)
            payload = payload if rnd.random() < 0.5 else "retract"
        else:
            live.add(uk)
            kind = rnd.choice(ADDS)
        changes.append(Change(kind, (0, uk, rnd.randrange(3), payload)))
    return changes


def duplicates(rnd: random.Random, length: int, distinct: int = 4) -> list[Change]:
    """Without an upsert key: many equal rows (a multiset), retractions of first occurrences."""
    changes = []
    for _ in range(length):
        row: Row = (0, rnd.randrange(distinct), 0, "d")
        kind = rnd.choice(ADDS) if rnd.random() < 0.55 else rnd.choice(RETRACTS)
        changes.append(Change(kind, row))
    return changes


def channel_merge(rnd: random.Random, logical: Sequence[Change], channels: int, route: int) -> list[Change]:
    """Route each change by column ``route`` to a channel; merge keeping each channel's order."""
    queues: list[list[Change]] = [[] for _ in range(channels)]
    salt = rnd.random()
    for change in logical:
        queues[hash((salt, repr(change.row[route]))) % channels].append(change)
    merged: list[Change] = []
    while any(queues):
        queue = rnd.choice([queue for queue in queues if queue])
        merged.append(queue.pop(0))
    return merged


def valid_stream(rnd: random.Random, length: int, keys: Keys) -> list[Change]:
    """A logically ordered changelog (inserts, ``-U``/``+U`` updates, deletes) over 3 sink keys,
    routed over up to 4 channels (by upsert key, else by ``level``) and merged."""
    logical: list[Change] = []
    current: dict[int, Row] = {}
    for step in range(length):
        pk = rnd.randrange(3)
        old = current.get(pk)
        uk = old[1] if old is not None and keys.has_upsert_key else rnd.randrange(3)
        new: Row = (pk, uk, rnd.randrange(4), f"v{step}")
        if old is None:
            logical.append(Change(RowKind.INSERT, new))
            current[pk] = new
        elif rnd.random() < 0.2:
            logical.append(Change(RowKind.DELETE, old))
            del current[pk]
        else:
            logical += [Change(RowKind.UPDATE_BEFORE, old), Change(RowKind.UPDATE_AFTER, new)]
            current[pk] = new
    route = 1 if keys.has_upsert_key else 2
    return channel_merge(rnd, logical, rnd.randint(1, 4), route)


def long_history(rnd: random.Random, rows: int) -> list[Change]:
    """``rows`` adds on one key (some duplicates), then retractions of every one in random
    order (first, middle and last occurrences), ending with an empty key."""
    added = [(0, rnd.randrange(rows // 2 + 1), 0, "h") for _ in range(rows)]
    changes = [Change(rnd.choice(ADDS), row) for row in added]
    rnd.shuffle(added)
    changes += [Change(rnd.choice(RETRACTS), row) for row in added]
    return changes


class StampedHistories:
    """Expected (row, stamp) elements per context key: the model's rules plus the specification's stamps.

    An append is stamped with the input's stamp; an in-place replacement (rule 4) re-stamps
    (``on_create_and_write``); a retraction removes the first match (rule 6).
    """

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.elements: dict[bytes, list[tuple[Row, int]]] = {}

    def apply(self, change: Change, stamp: int) -> None:
        context = self.keys.context_key(change.row)
        elements = self.elements.setdefault(context, [])
        wanted = self.keys.match_key(change.row)
        position = next(
            (i for i, (row, _) in enumerate(elements) if self.keys.match_key(row) == wanted), None
        )
        if change.kind.is_add:
            if position is not None and self.keys.has_upsert_key:
                elements[position] = (change.row, stamp)
            else:
                elements.append((change.row, stamp))
        elif position is not None:
            del elements[position]
        if not elements:
            del self.elements[context]
