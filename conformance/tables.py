"""Keyed tables and live rows: what the convergence property (docs/spec.md section 6, rule 12) compares.

A *keyed table* maps a sink key (the canonical encoding of the PK projection, type-aware) to
one row. All functions are O(number of changes) dictionary operations, except the live-row
functions, which are O(changes * live rows).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

from ..spec import Change, Keys, Row, RowKind, canonical

Table = dict[bytes, Row]


def exact(table: Table) -> dict[bytes, bytes]:
    """The table with each row replaced by its canonical encoding: compare tables type-exactly."""
    return {context: canonical(row) for context, row in table.items()}


def sink_table(keys: Keys, emitted: Iterable[Change | None]) -> Table:
    """Apply a materializer's output to an upsert sink: ``+I``/``+U`` upsert, ``-D`` delete.

    Raises AssertionError on ``-U`` (a materializer never emits it, rule 11).
    """
    table: Table = {}
    for change in emitted:
        if change is None:
            continue
        assert change.kind is not RowKind.UPDATE_BEFORE, f"materializers never emit -U: {change!r}"
        context = keys.context_key(change.row)
        if change.kind.is_add:
            table[context] = change.row
        else:
            table.pop(context, None)
    return table


def logical_table(keys: Keys, logical: Iterable[Change]) -> Table:
    """Apply a logically ordered changelog to a keyed table: ADD upserts, RETRACT deletes."""
    table: Table = {}
    for change in logical:
        context = keys.context_key(change.row)
        if change.kind.is_add:
            table[context] = change.row
        else:
            table.pop(context, None)
    return table


def _live_after_each(keys: Keys, logical: Iterable[Change], bare_updates: bool) -> Iterator[list[Row]]:
    """The live rows after each change (the same list object, mutated in place)."""
    live: list[Row] = []
    for change in logical:
        if bare_updates:
            wanted = keys.match_key(change.row)
            found = [i for i, row in enumerate(live) if keys.match_key(row) == wanted]
        else:
            exact = canonical(change.row)
            found = [i for i, row in enumerate(live) if canonical(row) == exact]
        if change.kind.is_add:
            if bare_updates and found:
                live[found[0]] = change.row
            else:
                live.append(change.row)
        elif found:
            del live[found[0]]
        yield live


def live_rows(keys: Keys, logical: Iterable[Change], *, bare_updates: bool = False) -> list[Row]:
    """The rows live at the end of a logical changelog, in the order they became live.

    Retract-style: an ADD makes its row live, a RETRACT ends the first live copy of exactly
    that row. With ``bare_updates`` (upsert key): an ADD replaces the live row of its upsert
    key in place (or adds one), a RETRACT ends the live row of its upsert key.
    O(changes * live rows).
    """
    live: list[Row] = []
    for after in _live_after_each(keys, logical, bare_updates):
        live = after
    return list(live)


def live_counts(keys: Keys, rows: Iterable[Row]) -> dict[bytes, Counter[bytes]]:
    """Per sink key, the multiset (canonical encodings) of ``rows``: compares states as multisets."""
    result: dict[bytes, Counter[bytes]] = {}
    for row in rows:
        result.setdefault(keys.context_key(row), Counter())[canonical(row)] += 1
    return result


def max_live_per_key(keys: Keys, logical: Iterable[Change], *, bare_updates: bool = False) -> int:
    """The largest number of rows of one sink key live at any instant of ``logical``.

    Live rows as in :func:`live_rows`. O(changes * live rows).
    """
    highest = 0
    for live in _live_after_each(keys, logical, bare_updates):
        per_key = Counter(keys.context_key(row) for row in live)
        highest = max(highest, *per_key.values(), 0)
    return highest
