"""LEGACY on heap, changed in place with each row's match key kept beside it.

LEGACY's layout (:mod:`.legacy`) is one value per key, the key's row list, and every event
re-encodes the match key of each stored row it scans (O(n) encodings). On heap, with TTL and
async state off, the value is instead a record that never leaves memory, in one of two forms
by whether the strategy has an upsert key::

    with an upsert key:    context -> [rows, matches, counts]
    without (whole rows):  context -> [rows, matches]      (matches is rows itself while
                                                             every stored token is its row)
               rows       the key's rows, in insertion order (LEGACY's value)
               matches[i] the match key of rows[i] (rule 2), computed once, when it is stored
               counts[m]  how many stored rows have match key m (absent: none)

and each event changes it in place, journaling the inverse first (as VALUE's heap records do,
:mod:`.value_heap`, whose two forms these follow for the same reasons): with an upsert key an
ADD of a new match key appends without scanning and a retraction whose match key is not
stored is a miss without scanning; without one an ADD appends (rule 3: nothing is looked up,
nothing counted or hashed), and a retraction's miss scans the record. Otherwise
``list.index`` finds the first match over the stored tokens (no row re-encoded) and that one
row is replaced or deleted. Per event: 1 read, 0 or 1 state write (creating or emptying the
key), one match key computed (the incoming row's), and a C scan up to the first match.
Outputs, rule-7 counts and exported elements are LEGACY's: snapshots, savepoints and
migration see the rows only (``counts`` and ``matches`` are rebuilt on import).

The reference stays :class:`~.legacy.LegacyMaterializer` (every other backend, TTL, async
state, and a class built directly rather than by the registry).
"""

from __future__ import annotations

from typing import Any, Final

from mypy_extensions import mypyc_attr

from ...spec import Change, Element, Keys, RowKind
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state.heap import HeapBackend, HeapValueState
from .common import DELETE, INSERT, UPDATE_AFTER, emit, require
from .legacy import LegacyMaterializer
from .value import count_matches
from .value_heap import own_tokens

LegacyRecord = list[Any]  # [rows, matches, counts], or [rows, matches] without an upsert key


class _LegacyUndo:
    """Inverse of one in-place change of a LEGACY heap record, for rollback.

    The change is an ``int`` (an append to lists of that many rows), ``(position, row)`` (a
    rule-4 replacement) or ``(size, position, row, match)`` (a removal from lists of ``size``
    rows). Idempotent per list, like :class:`~.value_heap._RecordUndo`, so a change
    interrupted between its list operations is reverted exactly (and a record whose
    ``matches`` is ``rows`` is changed once); ``counts``, if kept, is recounted (O(n), on the
    failure path only).
    """

    def undo(self, record: LegacyRecord, change: Any, _unused: Any, /) -> None:
        rows: list[Any] = record[0]
        matches: list[MatchKey] = record[1]
        if type(change) is int:
            del rows[change:], matches[change:]
        elif len(change) == 2:
            position, row = change
            rows[position] = row
        else:
            size, position, row, match = change
            if len(rows) < size:
                rows.insert(position, row)
            if len(matches) < size:
                matches.insert(position, match)
        if len(record) == 3:
            counts: dict[MatchKey, int] = record[2]
            counts.clear()
            counts.update(count_matches(matches))


_UNDO: Final = _LegacyUndo()


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapLegacyMaterializer(LegacyMaterializer):
    """LEGACY on heap with TTL and async state off (module docstring)."""

    def __init__(self, keys: Keys, backend: HeapBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._use_match_tokens()
        self._records: HeapValueState = backend.value_state("legacy")  # LEGACY's ``_state``

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        """Rules 3-5 in place: 1 read (a new key: 1 write). O(1), or a scan to the first match."""
        records = self._records
        record: LegacyRecord | None = records.stored(context)
        if not self._upsert:
            return self._added(self._append(records, context, record, match, row), row)
        if record is None:
            records.put(context, [[row], [match], {match: 1}])
            return self._added(INSERT, row)
        rows: list[Any] = record[0]
        matches: list[MatchKey] = record[1]
        counts: dict[MatchKey, int] = record[2]
        count = counts.get(match)
        if count is not None:
            position = matches.index(match)
            records.journal(_UNDO, record, (position, rows[position]))
            rows[position] = row
            return self._added(UPDATE_AFTER, row)
        records.journal(_UNDO, record, len(rows))
        rows.append(row)
        matches.append(match)
        counts[match] = 1
        return self._added(UPDATE_AFTER, row)

    def _append(
        self,
        records: HeapValueState,
        context: bytes,
        record: LegacyRecord | None,
        match: MatchKey,
        row: StoredRow,
    ) -> RowKind:
        """Rule 3 without an upsert key: ``row`` appended to the whole-row record (a new key: 1
        write), nothing looked up; the kind to emit. O(1) (amortised: a record whose ``rows``
        stood for ``matches`` and meets a token that is not its row copies the tokens once)."""
        if record is None:
            rows = [row]
            records.put(context, [rows, rows if match is row else [match]])
            return INSERT
        rows = record[0]
        matches: list[MatchKey] = record[1]
        if match is not row and matches is rows:
            # Not journaled: a record with a matches list of its own equal to rows is as valid.
            matches = rows.copy()
            record[1] = matches
        records.journal(_UNDO, record, len(rows))
        rows.append(row)
        if matches is not rows:
            matches.append(match)
        return UPDATE_AFTER

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        """Rules 6-10 in place: 1 read (+1 delete if the key empties). O(1) plus a scan to the
        first match."""
        records = self._records
        record: LegacyRecord | None = records.stored(context)
        if not self._upsert:
            return self._retract_whole(records, context, record, match, change)
        counts: dict[MatchKey, int] | None = None if record is None else record[2]
        count = None if counts is None else counts.get(match)
        if record is None or counts is None or count is None:
            self._miss(context, change)
            return None
        rows: list[Any] = record[0]
        matches: list[MatchKey] = record[1]
        position = matches.index(match)
        size = len(rows)
        records.journal(_UNDO, record, (size, position, rows[position], match))
        rows.pop(position)  # a direct C call in the compiled build (``del`` is a slice assignment)
        matches.pop(position)
        if count > 1:
            counts[match] = count - 1
        else:
            del counts[match]
        if not rows:
            records.delete(context)
            return emit(DELETE, change.row)
        if position < size - 1:
            return None
        return emit(UPDATE_AFTER, rows[-1])

    def _retract_whole(
        self,
        records: HeapValueState,
        context: bytes,
        record: LegacyRecord | None,
        match: MatchKey,
        change: Change,
    ) -> Change | None:
        """:meth:`_retract` on a whole-row record: the first match found by ``list.index`` (a
        miss scans the record)."""
        if record is None:
            self._miss(context, change)
            return None
        rows: list[Any] = record[0]
        matches: list[MatchKey] = record[1]
        try:
            position = matches.index(match)
        except ValueError:
            self._miss(context, change)
            return None
        size = len(rows)
        records.journal(_UNDO, record, (size, position, rows[position], matches[position]))
        rows.pop(position)  # a direct C call in the compiled build (``del`` is a slice assignment)
        if matches is not rows:
            matches.pop(position)
        if not rows:
            records.delete(context)
            return emit(DELETE, change.row)
        if position < size - 1:
            return None
        return emit(UPDATE_AFTER, rows[-1])

    def _rows(self, context: bytes) -> list[StoredRow]:
        record: LegacyRecord | None = self._records.get(context)
        return [] if record is None else [tuple(row) for row in record[0]]

    def _elements(self, context: bytes) -> list[Element]:
        """Every row of ``context`` with stamp 0 (LEGACY without TTL)."""
        return [(row, 0) for row in self._rows(context)]

    def _load(self, context: bytes, elements: list[Element]) -> None:
        rows = [tuple(row) for row, _ in elements]
        matches = [self._match_key(row) for row in rows]
        if self._upsert:
            self._records.put(context, [rows, matches, count_matches(matches)])
        else:
            self._records.put(context, [rows, rows if own_tokens(rows, matches) else matches])

    def _check(self) -> None:
        """Every stored value is a record of a non-empty row list, each row's match key and
        their counts. O(state)."""
        for context in self._records.contexts():
            record = self._records.stored(context)
            shaped = type(record) is list and len(record) == (3 if self._upsert else 2)
            require(shaped, context, f"not a LEGACY heap record: {record!r}")
            rows: list[Any] = record[0] if record else []
            matches: list[MatchKey] = record[1] if record else []
            require(len(rows) >= 1, context, "an empty history is stored")
            require(len(matches) == len(rows), context, "rows and match keys differ in length")
            expected = [self._match_key(tuple(row)) for row in rows]
            require(list(matches) == expected, context, "a stored match key is not its row's")
            if record and self._upsert:
                counted = record[2] == count_matches(matches)
                require(counted, context, "counts differ from the stored match keys")
            if matches is rows:  # then each token must be its row object (value_heap.check_heap_record)
                require(own_tokens(rows, expected), context, "a row stands for a token it is not")
