"""The reference model of the sink upsert materializer (DESIGN section 3, rules 1-11).

Written to be obviously right, not fast: each context key's state is a Python list of rows
in insertion order, and every rule is a few lines that say what the rule says. Every
implementation in the project is checked against this model, change by change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from .changes import Change, Row, RowKind
from .keys import Keys

log = logging.getLogger("upsertmat")


def _first_match(history: list[Row], keys: Keys, row: Row) -> int | None:
    """Index of the first stored row matching ``row`` (rule 2), or None."""
    wanted = keys.match_key(row)
    for index, stored in enumerate(history):
        if keys.match_key(stored) == wanted:
            return index
    return None


def apply_to_history(history: list[Row], keys: Keys, change: Change) -> Change | None:
    """Apply one change to one context key's history, in place; return what to emit.

    This function is the specification. O(len(history)) match-key computations.
    """
    was_empty = not history
    if change.kind.is_add:  # rule 1
        position = _first_match(history, keys, change.row) if keys.has_upsert_key else None
        if position is None:
            history.append(change.row)  # rules 3 and 4 (no match): append
        else:
            history[position] = change.row  # rule 4: replace the first match in place
        # rule 5: exactly one change, carrying the incoming row
        return Change(RowKind.INSERT if was_empty else RowKind.UPDATE_AFTER, change.row)

    position = _first_match(history, keys, change.row)  # rule 6: the FIRST match
    if position is None:
        return None  # rule 7: a miss; the caller counts and logs it
    was_last = position == len(history) - 1
    del history[position]
    if not history:
        return Change(RowKind.DELETE, change.row)  # rule 8: the INCOMING row's values
    if was_last:
        return Change(RowKind.UPDATE_AFTER, history[-1])  # rule 9: roll back to the new last
    return None  # rule 10: a non-last element left; the sink already shows the last one


class ModelMaterializer:
    """The model over many context keys; implements the ``Materializer`` contract.

    State: ``dict[context key, list[Row]]``; a key whose list becomes empty is dropped.
    ``retract_misses`` counts rule-7 retractions (each is also logged as a warning).
    """

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.retract_misses = 0
        self.now = 0
        self._histories: dict[bytes, list[Row]] = {}

    def process(self, change: Change) -> Change | None:
        """Feed one change; return the emitted change or None (rule 11: 0 or 1 output)."""
        context = self.keys.context_key(change.row)
        history = self._histories.setdefault(context, [])
        size_before = len(history)
        emitted = apply_to_history(history, self.keys, change)
        if not change.kind.is_add and len(history) == size_before:  # rule 7: a miss
            self.retract_misses += 1
            log.warning(
                "retraction matched no stored row (context key %s): %r",
                context.decode("utf-8", "replace"),
                change,
            )
        if not history:
            del self._histories[context]
        return emitted

    def advance_time(self, now: int) -> None:
        """Move the clock (processing time or watermark). Without TTL nothing else happens."""
        self.now = max(self.now, now)

    def history(self, context_key: bytes) -> list[Row]:
        """A copy of one context key's stored rows, in insertion order."""
        return list(self._histories.get(context_key, ()))

    def histories(self) -> Iterator[tuple[bytes, list[Row]]]:
        """Every non-empty context key with a copy of its rows, in first-seen order."""
        for context, rows in self._histories.items():
            yield context, list(rows)

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Set the rows of each given context key (an empty list removes the key)."""
        for context, rows in histories:
            if rows:
                self._histories[context] = [tuple(row) for row in rows]
            else:
                self._histories.pop(context, None)

    def close(self) -> None:
        """Nothing to release; part of the contract."""


def run_model(keys: Keys, changes: Iterable[Change]) -> list[Change | None]:
    """The model's output for each input change, in order (a convenience for tests and docs)."""
    model = ModelMaterializer(keys)
    return [model.process(change) for change in changes]
