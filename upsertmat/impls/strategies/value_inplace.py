"""VALUE on heap, changed in place: O(1) per event unless a stored match must be located.

The layout is VALUE's (:mod:`.value`) with a fourth element that never leaves memory::

    context -> [rows, stamps, matches, counts]
               counts[m]  how many stored elements have match key m (absent: none)

Heap state keeps the record by reference (:meth:`~upsertmat.impls.state.heap.HeapValueState.stored`),
so an event changes the three lists in place instead of copying them: an ADD that matches
nothing appends (``match not in counts``: O(1), no scan of ``matches``); a rule-4 replacement
and a RETRACT locate the first match with ``list.index`` (a C scan, stopping at the match)
and change or remove that one element. Before each change the inverse is journaled
(:meth:`~upsertmat.impls.state.heap.HeapValueState.journal`), so an input that fails half-way
is rolled back like any other heap write. Per event: 1 read, 0 or 1 state write (creating or
emptying the key), O(1) work plus the ``list.index`` scan up to the first match (none for
an ADD of a new upsert key or a retraction with no match) and ``del`` at that position (a
C ``memmove``). Without this, VALUE copies the record on every event (its general path,
shared with the byte backends, must not change a value the state hands out).

Used for VALUE on a :class:`~upsertmat.impls.state.heap.HeapBackend` with TTL off (with TTL,
expiry rewrites whole records: the general path). Snapshots, savepoints and migration see only
elements (:meth:`~.common.StrategyBase.export_elements`), so ``counts`` is rebuilt on import.
"""

from __future__ import annotations

from typing import Any

from ...spec import Change, Keys, Row, RowKind
from ..settings import Settings
from ..state.heap import HeapBackend, HeapValueState
from .common import StrategyBase, emit, require
from .value import ValueMaterializer, check_record

_APPEND = 0
_REPLACE = 1
_REMOVE = 2


def _count(counts: dict[bytes, int], matches: list[bytes]) -> None:
    """Set ``counts`` to the number of occurrences of each match key in ``matches``. O(n)."""
    counts.clear()
    for match in matches:
        counts[match] = counts.get(match, 0) + 1


class _RecordUndo:
    """Inverse of one in-place change of a record, for heap rollback.

    Each undo is idempotent per list (it checks the list's length before putting an element
    back), so a change interrupted between two of its list operations (a ``KeyboardInterrupt``
    lands between bytecodes) is reverted exactly; ``counts`` is recounted from ``matches``
    (O(n), on the failure path only).
    """

    def undo(self, record: list[Any], change: tuple[Any, ...], _unused: Any, /) -> None:
        rows, stamps, matches, counts = record
        kind, size = change[0], change[1]
        if kind == _APPEND:  # the lists had ``size`` elements
            del rows[size:], stamps[size:], matches[size:]
        elif kind == _REPLACE:
            _, _, position, row, stamp = change
            rows[position] = row
            stamps[position] = stamp
        else:  # _REMOVE of element ``position`` from lists of ``size`` elements
            _, _, position, row, stamp, match = change
            if len(rows) < size:
                rows.insert(position, row)
            if len(stamps) < size:
                stamps.insert(position, stamp)
            if len(matches) < size:
                matches.insert(position, match)
        _count(counts, matches)


_UNDO = _RecordUndo()


class HeapValueMaterializer(ValueMaterializer):
    """VALUE on heap with TTL off, records changed in place (module docstring)."""

    def __init__(self, keys: Keys, backend: HeapBackend, settings: Settings | None = None) -> None:
        StrategyBase.__init__(self, keys, backend, settings)
        self._values: HeapValueState = backend.value_state("value")

    def _add(self, context: bytes, match: bytes, row: Row, stamp: int) -> Change:
        """1 read; a new key 1 write. O(1), or a scan to the first match (rule 4)."""
        values = self._values
        record = values.stored(context)
        if record is None:
            values.put(context, [[row], [stamp], [match], {match: 1}])
            return emit(RowKind.INSERT, row)
        rows, stamps, matches, counts = record
        if self._upsert and match in counts:
            position = matches.index(match)
            values.journal(_UNDO, record, (_REPLACE, 0, position, rows[position], stamps[position]))
            rows[position] = row
            if self._restamp_replaced:
                stamps[position] = stamp
            return emit(RowKind.UPDATE_AFTER, row)
        values.journal(_UNDO, record, (_APPEND, len(rows)))
        rows.append(row)
        stamps.append(stamp)
        matches.append(match)
        counts[match] = counts.get(match, 0) + 1
        return emit(RowKind.UPDATE_AFTER, row)

    def _retract(self, context: bytes, match: bytes, change: Change, stamp: int) -> Change | None:
        """1 read; 1 delete if the key empties. O(1) plus a scan to the first match."""
        values = self._values
        record = values.stored(context)
        if record is None or match not in record[3]:
            self._miss(context, change)
            return None
        rows, stamps, matches, counts = record
        position = matches.index(match)
        size = len(rows)
        values.journal(_UNDO, record, (_REMOVE, size, position, rows[position], stamps[position], match))
        del rows[position], stamps[position], matches[position]
        left = counts[match] - 1
        if left:
            counts[match] = left
        else:
            del counts[match]
        if not rows:
            values.delete(context)
            return emit(RowKind.DELETE, change.row)
        if position < size - 1:  # rule 10
            return None
        last = size - 2
        if self._restamp_rollback:
            values.journal(_UNDO, record, (_REPLACE, 0, last, rows[last], stamps[last]))
            stamps[last] = stamp
        return emit(RowKind.UPDATE_AFTER, tuple(rows[last]))

    def _check(self) -> None:
        """Every stored record (:func:`~.value.check_record`) and its ``counts``."""
        for context in self._values.contexts():
            record = self._values.stored(context)
            require(record is not None and len(record) == 4, context, "not an in-place VALUE record")
            assert record is not None
            check_record(context, record[:3], self._match_key)
            expected: dict[bytes, int] = {}
            _count(expected, record[2])
            require(record[3] == expected, context, "counts differ from the stored match keys")

    def _load(self, context: bytes, elements: list[tuple[Row, int]]) -> None:
        rows = [row for row, _ in elements]
        matches = [self._match_key(row) for row in rows]
        counts: dict[bytes, int] = {}
        _count(counts, matches)
        self._values.put(context, [rows, [stamp for _, stamp in elements], matches, counts])
