"""Rule C3 in O(pending): fold one key's pending changes onto its current row.

The model folds over a plain list (O(pending x survivors)); here a survivor list with
tombstones plus, per match key, the queue of live positions holding it, makes every step O(1):
an ADD with an upsert key replaces the first live position of its match key, any other ADD
appends; a RETRACT kills the first live position of its match key (rule 6: the first match).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from ...spec import Keys, Row


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
