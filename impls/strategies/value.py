"""VALUE: per context key one value holding the list with per-element timestamps.

Layout (one ``ValueState`` entry per context key)::

    context -> [rows, stamps, matches]      three parallel lists, insertion order
               rows[i]    the stored row
               stamps[i]  its timestamp (ms)
               matches[i] its match key (rule 2), so matching never re-encodes stored rows

Element ``i`` is ``(rows[i], stamps[i])``: exactly what MAP's nodes are built from when
ADAPTIVE converts a key. Per event: 1 read and 1 write (or delete) of the key's value, and
one C-level scan of ``matches`` (``list.index``): O(n) bytes moved, O(1) state accesses.
The right choice for short histories; LEGACY's successor with per-element timestamps.

TTL: any timer of a key drops every expired element of its record. While the bounded expiry
sweep lags (docs/ttl.md), an input first drops the expired elements of the record it read
(:func:`live_record`: one more O(n) scan of the stamps, +1 write if one was expired).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state import StateBackend
from .common import DELETE, INSERT, UPDATE_AFTER, StrategyBase, emit, require

ValueRecord = list[Any]  # [rows, stamps, matches]


def new_record(rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]) -> ValueRecord:
    """A VALUE record from parallel lists (taken by reference)."""
    return [rows, stamps, matches]


def record_add(
    record: ValueRecord | None,
    match: MatchKey,
    row: StoredRow,
    stamp: int,
    upsert: bool,
    restamp: bool = True,
) -> tuple[ValueRecord, bool]:
    """Rules 3-4 on a record (None = empty key); returns ``(record to store, stamp written)``.

    With an upsert key the first element whose match key equals ``match`` is replaced in
    place, re-stamped unless ``restamp`` is False (TTL ``on_create``); otherwise (or with no
    match) the row is appended with ``stamp``. Returns a new record (the given one is not
    mutated: heap state shares it with the undo journal). O(n).
    """
    if record is None:
        return [[row], [stamp], [match]], True
    # Copy before mutating: a heap backend's record is shared with its undo journal.
    record = [record[0].copy(), record[1].copy(), record[2].copy()]
    rows, stamps, matches = record
    if upsert:
        try:
            position = matches.index(match)
        except ValueError:
            pass
        else:
            rows[position] = row
            if restamp:
                stamps[position] = stamp
            return record, restamp
    rows.append(row)
    stamps.append(stamp)
    matches.append(match)
    return record, True


def record_retract(
    record: ValueRecord, match: MatchKey, restamp: int | None = None
) -> tuple[bool, StoredRow | None]:
    """Rule 6 on a non-empty record, in place: remove the first element matching ``match``.

    Returns ``(found, rollback)``: ``found`` False is rule 7 (record unchanged); ``rollback``
    is the new last row when the removed element was the last one and rows remain (rule 9);
    it then takes the stamp ``restamp`` unless that is None (TTL ``on_read_and_write``).
    An emptied record (rule 8) is left with empty lists. O(n).
    """
    try:
        position = record[2].index(match)
    except ValueError:
        return False, None
    # New inner lists (the outer record is the caller's to mutate; heap state shares the inner
    # lists with its undo journal).
    record[:] = rows, stamps, matches = [record[0].copy(), record[1].copy(), record[2].copy()]
    del rows[position], stamps[position], matches[position]
    if rows and position == len(rows):
        if restamp is not None:
            stamps[-1] = restamp
        return True, tuple(rows[-1])
    return True, None


def record_expire(record: ValueRecord, now: int, ttl_ms: int) -> int:
    """Remove, in place, every element with ``now >= stamp + ttl_ms``; how many were. O(n)."""
    rows, stamps, matches = record
    live = [position for position, stamp in enumerate(stamps) if now < stamp + ttl_ms]
    removed = len(stamps) - len(live)
    if removed:
        record[:] = [[rows[i] for i in live], [stamps[i] for i in live], [matches[i] for i in live]]
    return removed


def live_record(
    state: Any,
    context: bytes,
    record: ValueRecord | None,
    now: int,
    ttl_ms: int,
    noted: Callable[[bytes, int], None] | None = None,
) -> ValueRecord | None:
    """``record`` (of ``context`` in value state ``state``) without its expired elements, which
    are removed from the state here (1 write or delete, only if one was expired); None if
    none is left. ``noted(context, removed)`` is told of a removal. For reads while the expiry
    sweep lags (docs/ttl.md). O(n), in place."""
    if record is None:
        return record
    removed = record_expire(record, now, ttl_ms)
    if not removed:
        return record
    if noted is not None:
        noted(context, removed)
    if record[0]:
        state.put(context, record)
        return record
    state.delete(context)
    return None


def count_matches(matches: list[MatchKey]) -> dict[MatchKey, int]:
    """Match key -> how many elements of a record have it. O(n)."""
    counts: dict[MatchKey, int] = {}
    for match in matches:
        counts[match] = counts.get(match, 0) + 1
    return counts


def check_record(
    context: bytes, record: ValueRecord | None, match_key: Callable[[StoredRow], MatchKey]
) -> int:
    """Verify a stored VALUE record (raise LayoutError); returns its size. O(n).

    Three parallel, non-empty lists; every stored match key is the match key of its row; an
    in-place heap record's fourth element counts each stored match key exactly.
    """
    require(record is not None and len(record) in (3, 4), context, f"not a VALUE record: {record!r}")
    rows, stamps, matches = (record or ([], [], []))[:3]
    require(len(rows) == len(stamps) == len(matches), context, "rows, stamps and matches differ in length")
    require(len(rows) >= 1, context, "an empty record is stored")
    expected = [match_key(tuple(row)) for row in rows]
    require(list(matches) == expected, context, "a stored match key is not its row's")
    if record is not None and len(record) == 4:  # an in-place heap record (value_heap.py)
        require(record[3] == count_matches(matches), context, "counts differ from the stored match keys")
    return len(rows)


def record_elements(record: ValueRecord) -> list[tuple[StoredRow, int]]:
    """(row, stamp) of every element of a record, in insertion order."""
    return [(tuple(row), stamp) for row, stamp in zip(record[0], record[1], strict=True)]


@mypyc_attr(allow_interpreted_subclasses=True)
class ValueMaterializer(StrategyBase):
    """VALUE on any backend: ``ValueState`` ``"value"`` holds :data:`ValueRecord` per key."""

    strategy_name = "VALUE"

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._values = self._value_state("value")

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        """1 read, 1 write (+1 timer write with TTL)."""
        record = self._values.get(context)
        if self._lazy:
            record = live_record(self._values, context, record, self._now, self._ttl_ms, self._note_expired)
        kind = INSERT if record is None else UPDATE_AFTER
        record, stamped = record_add(record, match, row, stamp, self._upsert, self._restamp_replaced)
        self._values.put(context, record)
        if stamped:
            self._stamped(context, 0, stamp)
        return self._added(kind, row)

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        """1 read; 1 write or delete unless rule 7."""
        record = self._values.get(context)
        if self._lazy:
            record = live_record(self._values, context, record, self._now, self._ttl_ms, self._note_expired)
        if record is None:
            self._miss(context, change)
            return None
        found, rollback = record_retract(record, match, stamp if self._restamp_rollback else None)
        if not found:
            self._miss(context, change)
            return None
        if not record[0]:
            self._values.delete(context)
            return emit(DELETE, change.row)
        self._values.put(context, record)
        if rollback is None:
            return None
        if self._restamp_rollback:
            self._stamped(context, 0, stamp)
        return emit(UPDATE_AFTER, rollback)

    def _new_record(self, rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]) -> ValueRecord:
        """A record of parallel lists (taken by reference)."""
        return new_record(rows, stamps, matches)

    def _expire_element(self, context: bytes, seq: int) -> None:
        """Any timer of a VALUE key: drop every expired element of its record. O(n)."""
        record = self._values.get(context)
        removed = 0 if record is None else record_expire(record, self._now, self._ttl_ms)
        if record is None or not removed:
            return
        self._note_expired(context, removed)
        if record[0]:
            self._values.put(context, record)
        else:
            self._values.delete(context)

    def _contexts(self) -> list[bytes]:
        return list(self._values.contexts())

    def _check(self) -> None:
        """Every stored record (:func:`check_record`)."""
        for context in self._values.contexts():
            check_record(context, self._values.get(context), self._match_key)

    def _elements(self, context: bytes) -> list[tuple[StoredRow, int]]:
        record = self._values.get(context)
        return [] if record is None else record_elements(record)

    def _drop(self, context: bytes) -> None:
        self._values.delete(context)

    def _load(self, context: bytes, elements: list[tuple[StoredRow, int]]) -> None:
        rows = [row for row, _ in elements]
        stamps = [stamp for _, stamp in elements]
        matches = [self._match_key(row) for row in rows]
        self._values.put(context, self._new_record(rows, stamps, matches))
        for stamp in set(stamps):
            self._stamped(context, 0, stamp)
