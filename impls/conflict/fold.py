"""Rules C1 and C3 in O(pending): cancel one key's raw changes, fold them onto its current row.

The model folds over a plain list (O(pending x survivors)); here a survivor list with
tombstones plus, per match key, the queue of live positions holding it, makes every step O(1):
an ADD with an upsert key replaces the first live position of its match key, any other ADD
appends; a RETRACT kills the first live position of its match key (rule 6: the first match).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ...spec import Keys, Row, canonical


def fold_pending(
    current: Row | None, pending: Iterable[tuple[bool, Row]], keys: Keys
) -> tuple[list[Row], int]:
    """The survivors of ``[current]`` after ``pending`` (in order) and the number of missed RETRACTs.

    O(len(pending)) match-key computations and dictionary operations.
    """
    rows: list[Row | None] = []  # None marks a removed survivor
    live: dict[bytes, deque[int]] = {}
    upsert = keys.has_upsert_key
    match_key = keys.match_key

    def append(row: Row) -> None:
        live.setdefault(match_key(row), deque()).append(len(rows))
        rows.append(row)

    if current is not None:
        append(current)
    misses = 0
    for is_add, row in pending:
        if is_add:
            positions = live.get(match_key(row)) if upsert else None
            if positions:
                rows[positions[0]] = row
            else:
                append(row)
            continue
        positions = live.get(match_key(row))
        if positions:
            rows[positions.popleft()] = None
        else:
            misses += 1
    return [row for row in rows if row is not None], misses


def cancel_pending(changes: Iterable[tuple[bool, Row]]) -> list[tuple[bool, Row]]:
    """Rule C1 applied to a key's raw changes in arrival order: what stays pending.

    Each change cancels the oldest still-pending change of the opposite kind with the identical
    (canonically equal) whole row, else it stays. Since C1 depends only on the order of one
    key's changes, applying it at compaction gives exactly the pending list that cancelling on
    arrival would have left. O(len(changes)) canonical encodings and dictionary operations.
    """
    kept: list[tuple[bool, Row] | None] = []
    waiting: dict[tuple[bool, bytes], deque[int]] = {}
    for is_add, row in changes:
        encoded = canonical(row)
        opposite = waiting.get((not is_add, encoded))
        if opposite:
            kept[opposite.popleft()] = None
            continue
        waiting.setdefault((is_add, encoded), deque()).append(len(kept))
        kept.append((is_add, row))
    return [change for change in kept if change is not None]
