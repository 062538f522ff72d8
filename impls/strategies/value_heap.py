"""VALUE records on heap, changed in place: O(1) per event unless a stored match must be located.

The layout is VALUE's (:mod:`.value`) kept by reference and changed in place, in one of two
forms, by whether the strategy has an upsert key::

    with an upsert key:     context -> [rows, stamps, matches, counts]
                            counts[m]  how many stored elements have match key m (absent: none)
    without (whole rows):   context -> [rows, stamps, matches]
                            matches is rows itself while every stored token is its own row

With an upsert key an ADD must find its match (rule 4), so ``counts`` answers "is it stored?"
in O(1): an ADD of a new upsert key appends without scanning ``matches``, a rule-4
replacement and a RETRACT locate the first match with ``list.index`` (a C scan, stopping at
the match). Without one an ADD never looks for a match (rule 3: it appends), so nothing is
counted: no dict of match keys is kept, hashed or updated per event (for a whole row that
was most of the event's extra cost: a new row's strings hashed once, the tuple hashed at
each ADD and RETRACT), and a RETRACT finds its element with ``list.index`` alone (a miss
scans the record, as the general layout's ``record_retract`` does). The match token of a
whole row is usually the row object itself (:func:`~upsertmat.impls.encoding.row_token`), so
while every stored token is its row ``matches`` *is* ``rows`` (one list, appended to and
popped from once); the first stored row whose token is another object (a row the token path
encodes, a list row) gives the record a ``matches`` list of its own, for as long as the key
holds rows (:func:`whole_record`).

Heap state keeps the record by reference
(:meth:`~upsertmat.impls.state.heap.HeapValueState.stored`), so an event changes the lists in
place instead of copying them. Before each change the inverse is journaled
(:meth:`~upsertmat.impls.state.heap.HeapValueState.journal`), so an input that fails half-way
is rolled back like any other heap write. Per event: 1 read, 0 or 1 state write (creating or
emptying the key), O(1) work plus the ``list.index`` scan up to the first match (none for
an ADD) and ``pop`` at that position (a C ``memmove``). Without this, VALUE copies the record
on every event (its general path, shared with the byte backends, must not change a value the
state hands out).

Used on a :class:`~upsertmat.impls.state.heap.HeapBackend` with TTL and async state off
(with TTL, expiry rewrites whole records: the general path) by VALUE
(:class:`HeapValueMaterializer`) and by ADAPTIVE in VALUE mode
(:class:`~.adaptive_heap.HeapAdaptiveMaterializer`). Snapshots, savepoints and migration see only elements
(:meth:`~.common.StrategyBase.export_elements`), so ``counts`` and the shared list are rebuilt
on import.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys, RowKind
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state.heap import HeapBackend, HeapValueState, Journal
from .common import DELETE, INSERT, UPDATE_AFTER, emit, require
from .value import ValueMaterializer, count_matches

_APPEND: Final = 0
_REPLACE: Final = 1
_REMOVE: Final = 2


def counted_record(rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]) -> list[Any]:
    """An in-place record with an upsert key, from parallel lists (taken by reference)."""
    return [rows, stamps, matches, count_matches(matches)]


def own_tokens(rows: list[StoredRow], matches: list[MatchKey]) -> bool:
    """Whether every row's match token is the row object itself (so ``rows`` can stand for
    ``matches``). O(n)."""
    return all(match is row for row, match in zip(rows, matches, strict=True))


def whole_record(rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]) -> list[Any]:
    """An in-place record without an upsert key, from parallel lists (taken by reference):
    ``[rows, stamps, rows]`` when every token is its own row (:func:`own_tokens`), else
    ``[rows, stamps, matches]``. O(n)."""
    return [rows, stamps, rows if own_tokens(rows, matches) else matches]


class _RecordUndo:
    """Inverse of one in-place change of a record, for heap rollback.

    The change is an ``int`` (an append to lists of that many elements; the common case, one
    object less to build per event), ``(_APPEND, size)`` (the same), ``(_REPLACE, 0, position,
    row, stamp)`` or ``(_REMOVE, size, position, row, stamp, match)``. Each undo is idempotent
    per list (it checks the list's length before putting an element back), so a change
    interrupted between two of its list operations (a ``KeyboardInterrupt`` lands between
    bytecodes) is reverted exactly, and a record whose ``matches`` is ``rows`` is changed
    once; ``counts`` (with an upsert key) is recounted from ``matches`` (O(n), on the failure
    path only).
    """

    def undo(self, record: list[Any], change: Any, _unused: Any, /) -> None:
        rows: list[Any] = record[0]
        stamps: list[int] = record[1]
        matches: list[MatchKey] = record[2]
        if type(change) is int:
            del rows[change:], stamps[change:], matches[change:]
        elif change[0] == _APPEND:  # the lists had ``size`` elements
            size = change[1]
            del rows[size:], stamps[size:], matches[size:]
        elif change[0] == _REPLACE:
            _, _, position, row, stamp = change
            rows[position] = row
            stamps[position] = stamp
        else:  # _REMOVE of element ``position`` from lists of ``size`` elements
            _, size, position, row, stamp, match = change
            if len(rows) < size:
                rows.insert(position, row)
            if len(stamps) < size:
                stamps.insert(position, stamp)
            if len(matches) < size:
                matches.insert(position, match)
        if len(record) == 4:
            counts: dict[MatchKey, int] = record[3]
            counts.clear()
            counts.update(count_matches(matches))


_UNDO: Final = _RecordUndo()


class _AppendUndo:
    """The inverse of the append :meth:`RecordJournal.appended` journaled last: the record's
    lists are cut back to ``size`` elements (idempotent per list), ``counts`` recounted if
    kept."""

    def __init__(self) -> None:
        self.record: list[Any] = []
        self.size = 0

    def undo(self, _context: Any, _key: Any, _previous: Any, /) -> None:
        _UNDO.undo(self.record, self.size, None)


class _RemoveUndo:
    """The inverse of the removal :meth:`RecordJournal.removed` journaled last: the element is
    put back at its position in each list that lacks it, ``counts`` recounted if kept."""

    def __init__(self) -> None:
        self.record: list[Any] = []
        self.size = 0
        self.position = 0
        self.row: StoredRow = None
        self.stamp = 0
        self.match: MatchKey = None

    def undo(self, _context: Any, _key: Any, _previous: Any, /) -> None:
        change = (_REMOVE, self.size, self.position, self.row, self.stamp, self.match)
        _UNDO.undo(self.record, change, None)


class RecordJournal:
    """Journals the appends and removals of in-place records into a heap backend's undo
    journal without building an undo record per change: one undo object per kind, whose fields
    are set before each change, journaled by its entry tuple (built once). Right because an
    input changes a record by at most one append and one removal, and the journal is emptied
    (commit) or replayed (rollback) after every input; a rollback undoes them newest first with
    every other write of the input, as any heap write. O(1) per change, no allocation."""

    def __init__(self, journal: Journal) -> None:
        self._journal = journal
        self._append = _AppendUndo()
        # ``Any``, not the UndoRecord tuple type: compiled code keeps a typed tuple unboxed and
        # would build a new tuple object at every append.
        self._append_entry: Any = (self._append, None, None, None)
        self._remove = _RemoveUndo()
        self._remove_entry: Any = (self._remove, None, None, None)

    def appended(self, record: list[Any], size: int) -> None:
        """Journal an append to ``record``, whose lists have ``size`` elements now."""
        undo = self._append
        undo.record = record
        undo.size = size
        self._journal.append(self._append_entry)

    def removed(
        self, record: list[Any], size: int, position: int, row: StoredRow, stamp: int, match: MatchKey
    ) -> None:
        """Journal the removal of element ``position`` (``row``, ``stamp``, ``match``) from
        ``record``, whose lists have ``size`` elements now."""
        undo = self._remove
        undo.record = record
        undo.size = size
        undo.position = position
        undo.row = row
        undo.stamp = stamp
        undo.match = match
        self._journal.append(self._remove_entry)


def add_in_place(
    values: HeapValueState,
    journal: RecordJournal,
    context: bytes,
    record: list[Any] | None,
    match: MatchKey,
    row: StoredRow,
    stamp: int,
    restamp: bool,
) -> RowKind:
    """Rules 3-5 on the stored record (with an upsert key: ``counts`` kept) of ``context`` in
    ``values`` (None: the key is empty),
    in place and journaled (an append through ``journal``): the first element
    matching ``match`` takes
    ``row`` (and ``stamp`` if ``restamp``), else the row is appended (an empty key gets a new
    record: 1 write). Returns the kind of the change to emit (``+I``/``+U`` of ``row``).
    O(1), or a scan to the first match."""
    if record is None:
        values.put(context, [[row], [stamp], [match], {match: 1}])
        return INSERT
    rows: list[Any] = record[0]
    stamps: list[int] = record[1]
    matches: list[MatchKey] = record[2]
    counts: dict[MatchKey, int] = record[3]
    if match in counts:
        position = matches.index(match)
        values.journal(_UNDO, record, (_REPLACE, 0, position, rows[position], stamps[position]))
        rows[position] = row
        if restamp:
            stamps[position] = stamp
        return UPDATE_AFTER
    journal.appended(record, len(rows))
    rows.append(row)
    stamps.append(stamp)
    matches.append(match)
    counts[match] = 1
    return UPDATE_AFTER


def append_in_place(
    values: HeapValueState,
    journal: RecordJournal,
    context: bytes,
    record: list[Any] | None,
    match: MatchKey,
    row: StoredRow,
    stamp: int,
) -> RowKind:
    """Rule 3 without an upsert key on the stored whole-row record of ``context`` in ``values``
    (None: the key is empty), in place and journaled (through ``journal``): the row is
    appended, nothing is looked up (an empty key gets a new record: 1 write). Returns the kind
    of the change to emit (``+I``/``+U`` of ``row``). O(1) (amortised: a record whose ``rows``
    stood for ``matches`` and meets a token that is not its row copies the tokens once)."""
    if record is None:
        rows = [row]
        values.put(context, [rows, [stamp], rows if match is row else [match]])
        return INSERT
    rows = record[0]
    stamps: list[int] = record[1]
    matches: list[MatchKey] = record[2]
    if match is not row and matches is rows:
        # Not journaled: a record with a matches list of its own equal to rows is as valid.
        matches = rows.copy()
        record[2] = matches
    journal.appended(record, len(rows))
    rows.append(row)
    stamps.append(stamp)
    if matches is not rows:
        matches.append(match)
    return UPDATE_AFTER


def retract_whole_in_place(
    values: HeapValueState,
    journal: RecordJournal,
    context: bytes,
    record: list[Any],
    match: MatchKey,
    restamp: int | None,
    change: Change,
) -> tuple[bool, Change | None]:
    """:func:`retract_in_place` on a whole-row record (no ``counts``): the first element whose
    token equals ``match`` is found by ``list.index`` (a miss scans the record). O(1) plus a
    scan to the first match (all of the record on a miss)."""
    rows: list[Any] = record[0]
    matches: list[MatchKey] = record[2]
    try:
        position = matches.index(match)
    except ValueError:
        return False, None
    stamps: list[int] = record[1]
    size = len(rows)
    journal.removed(record, size, position, rows[position], stamps[position], matches[position])
    # ``pop`` is a direct C call in the compiled build (``del`` goes through slice assignment).
    rows.pop(position)
    stamps.pop(position)
    if matches is not rows:
        matches.pop(position)
    return True, _after_removal(values, context, record, size, position, restamp, change)


def retract_in_place(
    values: HeapValueState,
    journal: RecordJournal,
    context: bytes,
    record: list[Any],
    match: MatchKey,
    restamp: int | None,
    change: Change,
) -> tuple[bool, Change | None]:
    """Rules 6-10 on the stored record of ``context`` in ``values``, in place and journaled (the
    removal through ``journal``):
    ``(found, output)``. ``found`` False is rule 7 (nothing changed; the caller counts the
    miss). A record that empties is deleted and ``output`` is the ``-D`` of ``change.row`` (the
    retracted row, rule 8); removing the last element emits ``+U`` of the new last one,
    which takes the stamp ``restamp`` unless that is None (rule 9); otherwise None (rule 10).
    O(1) plus a scan to the first match."""
    counts: dict[MatchKey, int] = record[3]
    count = counts.get(match)
    if count is None:
        return False, None
    rows: list[Any] = record[0]
    stamps: list[int] = record[1]
    matches: list[MatchKey] = record[2]
    position = matches.index(match)
    size = len(rows)
    journal.removed(record, size, position, rows[position], stamps[position], match)
    # ``pop`` is a direct C call in the compiled build (``del`` goes through slice assignment).
    rows.pop(position)
    stamps.pop(position)
    matches.pop(position)
    if count > 1:
        counts[match] = count - 1
    else:
        del counts[match]
    return True, _after_removal(values, context, record, size, position, restamp, change)


def _after_removal(
    values: HeapValueState,
    context: bytes,
    record: list[Any],
    size: int,
    position: int,
    restamp: int | None,
    change: Change,
) -> Change | None:
    """Rules 8-10 once element ``position`` has left ``record``'s lists (``size`` elements
    before): a record left empty is deleted and the ``-D`` of ``change.row`` (the retracted
    row) is the output; removing the last element makes the new last one the output (``+U``),
    restamped with ``restamp`` unless that is None (journaled); else None. O(1)."""
    rows: list[Any] = record[0]
    if not rows:
        values.delete(context)
        return emit(DELETE, change.row)
    if position < size - 1:
        return None
    stamps: list[int] = record[1]
    last = size - 2
    if restamp is not None:
        values.journal(_UNDO, record, (_REPLACE, 0, last, rows[last], stamps[last]))
        stamps[last] = restamp
    return emit(UPDATE_AFTER, tuple(rows[last]))


def add_to_record(
    values: HeapValueState,
    journal: RecordJournal,
    context: bytes,
    record: list[Any] | None,
    match: MatchKey,
    row: StoredRow,
    stamp: int,
    upsert: bool,
    restamp: bool,
) -> RowKind:
    """Rules 3-5 on an in-place record of either form: :func:`add_in_place` with an upsert key
    (``restamp``: a replaced element takes ``stamp``), :func:`append_in_place` without. The one
    place VALUE and ADAPTIVE's VALUE mode pick the form's add. Same cost as the one called."""
    if upsert:
        return add_in_place(values, journal, context, record, match, row, stamp, restamp)
    return append_in_place(values, journal, context, record, match, row, stamp)


def retract_from_record(
    values: HeapValueState,
    journal: RecordJournal,
    context: bytes,
    record: list[Any] | None,
    match: MatchKey,
    restamp: int | None,
    change: Change,
    upsert: bool,
) -> tuple[bool, Change | None]:
    """Rules 6-10 on an in-place record of either form (None: the key is empty, a miss):
    :func:`retract_in_place` with an upsert key, :func:`retract_whole_in_place` without (the
    one place VALUE and ADAPTIVE's VALUE mode pick the form's retraction). Same result and
    cost as the one called."""
    if record is None:
        return False, None
    if upsert:
        return retract_in_place(values, journal, context, record, match, restamp, change)
    return retract_whole_in_place(values, journal, context, record, match, restamp, change)


def in_place_record(
    rows: list[StoredRow], stamps: list[int], matches: list[MatchKey], upsert: bool
) -> list[Any]:
    """An in-place record of the form for ``upsert`` (:func:`counted_record` or
    :func:`whole_record`), from parallel lists taken by reference. O(n)."""
    if upsert:
        return counted_record(rows, stamps, matches)
    return whole_record(rows, stamps, matches)


def check_heap_record(
    context: bytes, record: list[Any] | None, upsert: bool, match_key: Callable[[StoredRow], MatchKey]
) -> None:
    """The in-place form of a VALUE record (module docstring): four elements with an upsert
    key, three without, where ``matches`` may be ``rows`` only if each row's token is that
    row object (:func:`~.value.check_record` compares tokens by equality, which a row passes
    for the token of any row it equals in Python). O(n)."""
    require(record is not None and len(record) == (4 if upsert else 3), context, "not an in-place record")
    if record is not None and record[2] is record[0]:
        require(not upsert, context, "an upsert key's record shares rows and match keys")
        rows: list[Any] = record[0]
        tokens = [match_key(row) for row in rows]
        require(own_tokens(rows, tokens), context, "a row stands for a token it is not")


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapValueMaterializer(ValueMaterializer):
    """VALUE on heap with TTL off, records changed in place (module docstring)."""

    def __init__(self, keys: Keys, backend: HeapBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._use_match_tokens()
        # ValueMaterializer's ``_values`` (async state is off: the same state), typed as heap's.
        self._heap_values: HeapValueState = backend.value_state("value")
        self._record_journal = RecordJournal(backend.journal)

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        """1 read; a new key 1 write. O(1), or a scan to the first match (rule 4)."""
        values = self._heap_values
        record: list[Any] | None = values.stored(context)
        journal = self._record_journal
        restamp = self._restamp_replaced
        kind = add_to_record(values, journal, context, record, match, row, stamp, self._upsert, restamp)
        return self._added(kind, row)

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        """1 read; 1 delete if the key empties. O(1) plus a scan to the first match."""
        values = self._heap_values
        record: list[Any] | None = values.stored(context)
        restamp = stamp if self._restamp_rollback else None
        journal = self._record_journal
        found, output = retract_from_record(
            values, journal, context, record, match, restamp, change, self._upsert
        )
        if not found:
            self._miss(context, change)
        return output

    def _new_record(self, rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]) -> list[Any]:
        return in_place_record(rows, stamps, matches, self._upsert)

    def _check(self) -> None:
        """VALUE's :func:`~.value.check_record` for every record, and each record's form:
        ``counts`` with an upsert key, none without (:func:`check_heap_record`). O(state)."""
        super()._check()
        for context in self._heap_values.contexts():
            check_heap_record(context, self._heap_values.stored(context), self._upsert, self._match_key)
