"""The reference model of the sink upsert materializer (docs/spec.md, rules 1-11 and section 7).

Written to be obviously right, not fast: each context key's state is a Python list of
elements ``(row, stamp)`` in insertion order, plus (per-key TTL) one stamp per key, and every
rule is a few lines that say what the rule says. TTL is modelled literally: before each input
every invisible element (or expired key) is deleted, then rules 1-11 run on what is left.
Every implementation in the project is checked against this model, change by change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from .changes import Change, Row, RowKind
from .contract import Element
from .keys import Keys
from .ttl import Granularity, TtlSettings, UpdateType

log = logging.getLogger("upsertmat")


def _first_match(history: list[Element], keys: Keys, row: Row) -> int | None:
    """Index of the first stored element whose row matches ``row`` (rule 2), or None."""
    wanted = keys.match_key(row)
    for index, (stored, _) in enumerate(history):
        if keys.match_key(stored) == wanted:
            return index
    return None


def apply_to_elements(
    history: list[Element],
    keys: Keys,
    change: Change,
    stamp: int = 0,
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE,
) -> Change | None:
    """Apply one change to one context key's (visible) elements, in place; return what to emit.

    This function is the specification. ``stamp`` is the input's stamp; per-element policy:
    an append takes ``stamp``; a rule-4 replacement takes it too, except under ``on_create``
    (keeps the old stamp); under ``on_read_and_write`` the element emitted by rule 9 is
    re-stamped with ``stamp``. O(len(history)) match-key computations.
    """
    was_empty = not history
    if change.kind.is_add:  # rule 1
        position = _first_match(history, keys, change.row) if keys.has_upsert_key else None
        if position is None:
            history.append((change.row, stamp))  # rules 3 and 4 (no match): append
        else:  # rule 4: replace the first match in place
            kept = history[position][1] if update_type is UpdateType.ON_CREATE else stamp
            history[position] = (change.row, kept)
        # rule 5: exactly one change, carrying the incoming row
        return Change(RowKind.INSERT if was_empty else RowKind.UPDATE_AFTER, change.row)

    position = _first_match(history, keys, change.row)  # rule 6: the FIRST match
    if position is None:
        return None  # rule 7: a miss; the caller counts and logs it
    was_last = position == len(history) - 1
    del history[position]
    if not history:
        return Change(RowKind.DELETE, change.row)  # rule 8: the INCOMING row's values
    if was_last:  # rule 9: roll back to the new last
        row = history[-1][0]
        if update_type is UpdateType.ON_READ_AND_WRITE:
            history[-1] = (row, stamp)
        return Change(RowKind.UPDATE_AFTER, row)
    return None  # rule 10: a non-last element left; the sink already shows the last one


def apply_to_history(history: list[Row], keys: Keys, change: Change) -> Change | None:
    """:func:`apply_to_elements` on bare rows (no TTL): the rules without stamps."""
    elements: list[Element] = [(row, 0) for row in history]
    emitted = apply_to_elements(elements, keys, change)
    history[:] = [row for row, _ in elements]
    return emitted


class ModelMaterializer:
    """The model over many context keys; implements ``Materializer`` and ``StateTransfer``.

    State: ``dict[context key, list[Element]]`` (a key whose list becomes empty is dropped)
    and, for ``Granularity.PER_KEY``, ``dict[context key, stamp]``. ``retract_misses`` counts
    rule-7 retractions (each is also logged as a warning).

    TTL (``ttl``; off by default): before each input, and in every view of the state, what
    is invisible at ``now`` is deleted — per element (``now >= stamp + ttl_ms``) or, per key,
    the whole history when ``now >= key stamp + ttl_ms``. Per-key stamps: every successful
    write (an ADD, or a RETRACT that matched) sets the key's stamp to the input's stamp;
    under ``on_create`` only the ADD that creates the key does (``on_read_and_write`` is the
    default there: rule 9's read is a matched RETRACT, a write already). ``now`` never goes
    back. Event time without ``ts`` raises MissingTimestampError before touching state.
    """

    def __init__(
        self,
        keys: Keys,
        ttl: TtlSettings | None = None,
        granularity: Granularity = Granularity.PER_ELEMENT,
    ) -> None:
        self.keys = keys
        self.ttl = ttl or TtlSettings()
        self.granularity = granularity
        self.retract_misses = 0
        self.now = 0
        self._histories: dict[bytes, list[Element]] = {}
        self._key_stamps: dict[bytes, int] = {}

    def _expire(self) -> None:
        """Delete everything invisible at ``now`` (the model does it eagerly, O(state))."""
        if not self.ttl.enabled:
            return
        for context in list(self._histories):
            if self.granularity is Granularity.PER_KEY:
                if not self.ttl.visible(self._key_stamps[context], self.now):
                    del self._histories[context], self._key_stamps[context]
                continue
            kept = [element for element in self._histories[context] if self.ttl.visible(element[1], self.now)]
            if kept:
                self._histories[context] = kept
            else:
                del self._histories[context]

    def process(self, change: Change) -> Change | None:
        """Feed one change; return the emitted change or None (rule 11: 0 or 1 output)."""
        stamp = self.ttl.stamp_of(change.ts, self.now)
        self._expire()
        context = self.keys.context_key(change.row)
        history = self._histories.setdefault(context, [])
        per_key = self.granularity is Granularity.PER_KEY
        was_empty = not history
        size_before = len(history)
        update_type = UpdateType.ON_CREATE_AND_WRITE if per_key else self.ttl.update_type
        emitted = apply_to_elements(history, self.keys, change, stamp, update_type)
        missed = not change.kind.is_add and len(history) == size_before
        if missed:  # rule 7
            self.retract_misses += 1
            log.warning(
                "retraction matched no stored row (context key %s): %r",
                context.decode("utf-8", "replace"),
                change,
            )
        if not history:
            del self._histories[context]
            self._key_stamps.pop(context, None)
        elif per_key and not missed and (was_empty or self.ttl.update_type is not UpdateType.ON_CREATE):
            self._key_stamps[context] = stamp
        return emitted

    def process_many(
        self, changes: Iterable[Change], out: list[Change | None] | None = None
    ) -> list[Change | None]:
        """:meth:`process` for each change in order, outputs appended to ``out`` (see
        :class:`~upsertmat.spec.contract.BatchProcessing`)."""
        out = [] if out is None else out
        for change in changes:
            out.append(self.process(change))
        return out

    def advance_time(self, now: int) -> None:
        """Move the clock (processing time or watermark); a time in the past is ignored."""
        self.now = max(self.now, now)

    def _elements_of(self, context: bytes) -> list[Element]:
        history = self._histories[context]
        if self.granularity is Granularity.PER_KEY:
            return [(row, self._key_stamps[context]) for row, _ in history]
        return list(history)

    def history(self, context_key: bytes) -> list[Row]:
        """One context key's visible rows, in insertion order."""
        self._expire()
        return [row for row, _ in self._histories.get(context_key, ())]

    def histories(self) -> Iterator[tuple[bytes, list[Row]]]:
        """Every non-empty context key with its visible rows, in first-seen order."""
        for context, elements in self.export_elements():
            yield context, [row for row, _ in elements]

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Set the rows of each given context key (an empty list removes the key), stamped ``now``."""
        self._import((context, [(tuple(row), self.now) for row in rows]) for context, rows in histories)

    def export_elements(self) -> Iterator[tuple[bytes, list[Element]]]:
        """Every non-empty context key with its visible elements (per key: the key's stamp)."""
        self._expire()
        for context in list(self._histories):
            yield context, self._elements_of(context)

    def import_elements(self, items: Iterable[tuple[bytes, list[Element]]], now: int) -> None:
        """Set the elements of each given key (empty removes it) and the clock to ``now``."""
        self.now = now
        self._import(items)

    def _import(self, items: Iterable[tuple[bytes, list[Element]]]) -> None:
        for context, elements in items:
            self._key_stamps.pop(context, None)
            if not elements:
                self._histories.pop(context, None)
                continue
            self._histories[context] = [(tuple(row), stamp) for row, stamp in elements]
            if self.granularity is Granularity.PER_KEY:
                self._key_stamps[context] = max(stamp for _, stamp in elements)

    def stats(self) -> dict[str, int]:
        """``keys`` and ``elements`` visible now (the model stores nothing else)."""
        self._expire()
        return {"keys": len(self._histories), "elements": sum(map(len, self._histories.values()))}

    def close(self) -> None:
        """Nothing to release; part of the contract."""


def run_model(
    keys: Keys,
    changes: Iterable[Change],
    ttl: TtlSettings | None = None,
    granularity: Granularity = Granularity.PER_ELEMENT,
) -> list[Change | None]:
    """The model's output for each input change, in order (a convenience for tests and docs)."""
    model = ModelMaterializer(keys, ttl, granularity)
    return [model.process(change) for change in changes]
