"""ADAPTIVE on heap: VALUE-mode records changed in place, MAP-mode keys written into the dicts.

ADAPTIVE's rules are :mod:`.adaptive`'s (VALUE per key while short, MAP while long); this is
its heap specialisation (docs/architecture.md, *Adding a strategy*), used on a
:class:`~upsertmat.impls.state.heap.HeapBackend` with TTL and async state off. A key in VALUE
mode is the in-place record of :mod:`.value_heap` (its ``add_to_record`` and
``retract_from_record``, which pick the record's form as VALUE does); a
key in MAP mode runs through :class:`~.linked_map_heap.HeapLinkedList` (a MAP meta is never
changed in place, so it is read by reference too); the conversions are ADAPTIVE's own.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state.heap import HeapBackend, HeapValueState
from .adaptive import AdaptiveMaterializer
from .common import DELETE, UPDATE_AFTER, emit
from .linked_map import Meta
from .linked_map_heap import HeapLinkedList
from .value_heap import (
    RecordJournal,
    add_to_record,
    check_heap_record,
    in_place_record,
    retract_from_record,
)


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapAdaptiveMaterializer(AdaptiveMaterializer):
    """ADAPTIVE on heap with TTL off: VALUE-mode records changed in place (module docstring);
    MAP-mode events through :class:`~.linked_map_heap.HeapLinkedList` (a MAP meta is never
    changed in place, so it is read by reference too); the conversions are ADAPTIVE's."""

    def __init__(self, keys: Keys, backend: HeapBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._use_match_tokens()
        self._heap_records: HeapValueState = backend.value_state("adaptive")
        self._record_journal = RecordJournal(backend.journal)
        self._heap_list = HeapLinkedList(backend)
        self._list = self._heap_list

    def _add_map_mode(
        self, context: bytes, meta: Meta, match: MatchKey, row: StoredRow, stamp: int
    ) -> Change:
        """Rules 3-5 on a key in MAP mode: O(1) dict operations."""
        added = self._heap_list.add_row(
            context, meta, match, row, stamp, self._upsert, self._restamp_replaced
        )
        if added is not None:
            self._heap_records.put(context, added)
        return self._added(UPDATE_AFTER, row)

    def _retract_map_mode(
        self, context: bytes, meta: Meta, match: MatchKey, change: Change, restamp: int | None
    ) -> Change | None:
        """Rules 6-10 on a key in MAP mode; a key left with ``low`` rows turns VALUE again."""
        found, after, rollback = self._heap_list.retract_first(context, meta, match, restamp)
        if not found:
            self._miss(context, change)
            return None
        if after is None:
            self._heap_records.delete(context)
            return emit(DELETE, change.row)
        self._store_meta(context, after)
        return None if rollback is None else emit(UPDATE_AFTER, rollback)

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        records = self._heap_records
        record: list[Any] | None = records.stored(context)
        if record is not None and type(record[0]) is int:  # MAP mode
            return self._add_map_mode(context, record, match, row, stamp)
        journal = self._record_journal
        restamp = self._restamp_replaced
        kind = add_to_record(records, journal, context, record, match, row, stamp, self._upsert, restamp)
        if record is None:  # the new key's record: one element already reaches high = 1
            record = records.stored(context)
            assert record is not None
        if len(record[0]) >= self.high:
            records.put(context, self._to_map(context, record))
        return self._added(kind, row)

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        records = self._heap_records
        record: list[Any] | None = records.stored(context)
        restamp = stamp if self._restamp_rollback else None
        if record is not None and type(record[0]) is int:  # MAP mode
            return self._retract_map_mode(context, record, match, change, restamp)
        journal = self._record_journal
        found, output = retract_from_record(
            records, journal, context, record, match, restamp, change, self._upsert
        )
        if not found:
            self._miss(context, change)
        return output

    def _new_record(self, rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]) -> list[Any]:
        return in_place_record(rows, stamps, matches, self._upsert)

    def _check(self) -> None:
        """ADAPTIVE's checks, and each VALUE-mode record's in-place form
        (:func:`~.value_heap.check_heap_record`). O(state)."""
        super()._check()
        for context in self._heap_records.contexts():
            record: list[Any] | None = self._heap_records.stored(context)
            if record is not None and type(record[0]) is not int:
                check_heap_record(context, record, self._upsert, self._match_key)
