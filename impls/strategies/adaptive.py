"""ADAPTIVE: VALUE for short histories, MAP for long ones, per context key.

A key starts in VALUE mode. When an ADD makes its size reach ``high`` it is converted to
MAP; when a RETRACT makes a MAP key's size fall to ``low`` it is converted back (``high >
low``, so a key hovering around one threshold does not convert on every event). Defaults:
400/300 on heap, 50/40 on every other backend (a byte backend pays per byte moved, so VALUE's
O(n) value rewrite stops paying off sooner); override with
``table.exec.sink.upsert-materialize-strategy.adaptive.threshold.high`` / ``.low``.

Layout: one ``ValueState`` ``"adaptive"`` per context key holds *either* a VALUE record
``[rows, stamps, matches]`` (VALUE mode) *or* a MAP meta ``[size, head, tail]`` (MAP
mode, with the nodes and index in MAP's map states) — so one read tells the mode and gives
the state to work on. A conversion copies the elements in order with their duplicates and
timestamps (O(n) accesses, once per crossing) and never changes what is emitted.

TTL (docs/ttl.md): while the bounded expiry sweep lags, an input reads its key through
:meth:`AdaptiveMaterializer._live`: VALUE's record filtering or MAP's chain and tail trims, a
trimmed MAP-mode key then stored through the ``low`` threshold check like any other.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..config import UnsupportedSetting
from ..rows import MatchKey, StoredRow
from ..settings import Backend, Settings
from ..state import StateBackend
from .common import DELETE, INSERT, UPDATE_AFTER, StrategyBase, emit, missing, require
from .linked_map import ROW, SIZE, STAMP, TAIL, LinkedList, Meta
from .value import (
    check_record,
    live_record,
    new_record,
    record_add,
    record_elements,
    record_expire,
    record_retract,
)

DEFAULT_THRESHOLDS: dict[Backend, tuple[int, int]] = {Backend.HEAP: (400, 300)}
OTHER_BACKENDS_THRESHOLDS = (50, 40)


def thresholds(settings: Settings) -> tuple[int, int]:
    """``(high, low)`` for ``settings``: its overrides, else the backend's defaults.

    Raises UnsupportedSetting unless ``high > low >= 0``.
    """
    default_high, default_low = DEFAULT_THRESHOLDS.get(settings.backend, OTHER_BACKENDS_THRESHOLDS)
    high = default_high if settings.threshold_high is None else settings.threshold_high
    low = default_low if settings.threshold_low is None else settings.threshold_low
    if not high > low >= 0:
        raise UnsupportedSetting(
            f"ADAPTIVE needs threshold.high > threshold.low >= 0, got high={high}, low={low} "
            f"(defaults on {settings.backend.value}: {default_high}/{default_low})"
        )
    return high, low


def is_map_mode(record: list[Any]) -> bool:
    """True for a MAP meta (a list of ints), False for a VALUE record (a list of lists)."""
    return type(record[0]) is int


@mypyc_attr(allow_interpreted_subclasses=True)
class AdaptiveMaterializer(StrategyBase):
    """ADAPTIVE on any backend. ``high``/``low``: the conversion thresholds in use."""

    strategy_name = "ADAPTIVE"

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """Refuse thresholds unless ``high > low >= 0`` (:func:`thresholds`)."""
        thresholds(settings)

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        super().__init__(keys, backend, settings)
        self.high, self.low = thresholds(settings)
        self._records = self._value_state("adaptive")
        self._list = LinkedList(self._index_state("index"), backend.map_state("nodes"))

    def _live(self, context: bytes, match: MatchKey) -> list[Any] | None:
        """The key's record or meta while the expiry sweep lags (docs/ttl.md): a VALUE record
        without its expired elements (:func:`~.value.live_record`), a MAP-mode key
        :meth:`~.linked_map.LinkedList.trim`-ed for ``match`` (its meta written raw, in MAP
        mode: the caller stores it through :meth:`_store_meta`); None if nothing is visible."""
        record = self._records.get(context)
        if record is None:
            return None
        if type(record[0]) is not int:
            return live_record(self._records, context, record, self._now, self._ttl_ms, self._note_expired)
        meta = self._list.trim(context, record, match, self)
        if meta is None:
            self._records.delete(context)
        elif meta is not record:
            self._records.put(context, meta)
        return meta

    def _index_reads(self, pairs: list[tuple[bytes, MatchKey]]) -> list[tuple[bytes, MatchKey]]:
        """Async state: only keys in MAP mode read the index (their records are prefetched
        already, so this asks the backend nothing)."""
        wanted = []
        for context, match in pairs:
            record = self._records.get(context)
            if record is not None and is_map_mode(record):
                wanted.append((context, match))
        return wanted

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        record = self._live(context, match) if self._lazy else self._records.get(context)
        if record is not None and type(record[0]) is int:  # MAP mode (is_map_mode, inlined)
            return self._add_map_mode(context, record, match, row, stamp)
        kind = INSERT if record is None else UPDATE_AFTER
        record, stamped = record_add(record, match, row, stamp, self._upsert, self._restamp_replaced)
        if len(record[0]) >= self.high:
            self._records.put(context, self._to_map(context, record))
        else:
            self._records.put(context, record)
            if stamped:
                self._stamped(context, 0, stamp)
        return self._added(kind, row)

    def _add_map_mode(
        self, context: bytes, meta: Meta, match: MatchKey, row: StoredRow, stamp: int
    ) -> Change:
        """Rules 3-5 on a key in MAP mode (``meta`` as read)."""
        if self._lazy:  # a trimmed key may have fallen to ``low``
            added = self._list.add(context, meta, match, row, stamp, self)
            self._store_meta(context, meta if added is None else added)
            return self._added(UPDATE_AFTER, row)
        added = self._list.add(context, meta, match, row, stamp, self)
        if added is not None:
            self._records.put(context, added)
        return self._added(UPDATE_AFTER, row)

    def _to_map(self, context: bytes, record: list[Any]) -> Meta:
        """Store a VALUE record as MAP nodes (a timer per node with TTL); the meta. O(n)."""
        meta = self._list.build(context, record[0], record[1], record[2])
        for seq, stamp in enumerate(record[1], start=1):
            self._stamped(context, seq, stamp)
        return meta

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        record = self._live(context, match) if self._lazy else self._records.get(context)
        if record is None:
            self._miss(context, change)
            return None
        restamp = stamp if self._restamp_rollback else None
        if type(record[0]) is int:  # MAP mode (is_map_mode, inlined)
            return self._retract_map_mode(context, record, match, change, restamp)
        found, rollback = record_retract(record, match, restamp)
        if not found:
            self._miss(context, change)
            return None
        if not record[0]:
            self._records.delete(context)
            return emit(DELETE, change.row)
        self._records.put(context, record)
        if rollback is None:
            return None
        if restamp is not None:
            self._stamped(context, 0, restamp)
        return emit(UPDATE_AFTER, rollback)

    def _retract_map_mode(
        self, context: bytes, meta: Meta, match: MatchKey, change: Change, restamp: int | None
    ) -> Change | None:
        """Rules 6-10 on a key in MAP mode (``meta`` as read)."""
        entry = self._list.find(context, match)
        if entry is None:
            if self._lazy:  # a trimmed key may have fallen to ``low``
                self._store_meta(context, meta)
            self._miss(context, change)
            return None
        if self._lazy:
            after, rollback = self._list.remove_visible(context, meta, entry, match, restamp, self)
        else:
            after, rollback = self._list.remove(context, meta, entry, match, restamp=restamp)
        if after is None:
            self._records.delete(context)
            return emit(DELETE, change.row)
        if rollback is not None and restamp is not None:
            self._stamped(context, after[TAIL], restamp)
        self._store_meta(context, after)
        return None if rollback is None else emit(UPDATE_AFTER, rollback)

    def _new_record(self, rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]) -> list[Any]:
        """A VALUE-mode record of parallel lists (taken by reference)."""
        return new_record(rows, stamps, matches)

    def _store_meta(self, context: bytes, meta: Meta) -> None:
        """Write a MAP-mode key's meta, converting it to VALUE when its size is ``<= low``."""
        if meta[SIZE] <= self.low:
            self._records.put(context, self._to_value(context, meta))
        else:
            self._records.put(context, meta)

    def _expire_element(self, context: bytes, seq: int) -> None:
        """VALUE mode: drop every expired element (any timer). MAP mode: node ``seq`` if it
        is expired (timers with seq 0 were set in VALUE mode; the conversion re-armed them)."""
        record = self._records.get(context)
        if record is None:
            return
        if type(record[0]) is not int:
            removed = record_expire(record, self._now, self._ttl_ms)
            if removed:
                self._note_expired(context, removed)
                if record[0]:
                    self._records.put(context, record)
                else:
                    self._records.delete(context)
            return
        node = self._list.node(context, seq) if seq else None
        if node is None or not self._expired(node[STAMP]):
            return
        match = self._match_key(tuple(node[ROW]))
        entry = self._list.find(context, match)
        if entry is None:
            raise missing("index", context, seq)
        meta, _ = self._list.remove(context, record, entry, match, seq)
        self._note_expired(context)
        if meta is None:
            self._records.delete(context)
        else:
            self._store_meta(context, meta)

    def _to_value(self, context: bytes, meta: Meta) -> list[Any]:
        """The VALUE record of a MAP-mode key, whose nodes and index are dropped. O(n)."""
        rows: list[StoredRow] = []
        stamps: list[int] = []
        for node in self._list.walk(context, meta):
            rows.append(node[ROW])
            stamps.append(node[STAMP])
        self._list.drop(context)
        return self._new_record(rows, stamps, [self._match_key(row) for row in rows])

    def mode(self, context: bytes) -> str | None:
        """``"VALUE"``, ``"MAP"`` or None (empty key): how ``context`` is stored now."""
        record = self._records.get(context)
        if record is None:
            return None
        return "MAP" if is_map_mode(record) else "VALUE"

    def _contexts(self) -> list[bytes]:
        return list(self._records.contexts())

    def _check(self) -> None:
        """VALUE-mode keys: :func:`check_record`, size below ``high``; MAP-mode keys:
        :meth:`LinkedList.check`, size above ``low``; no nodes or index entries of a key not
        in MAP mode. O(state)."""
        in_map_mode = set()
        for context in self._records.contexts():
            record: list[Any] = self._records.get(context) or []
            require(bool(record), context, "listed without a record")
            if is_map_mode(record):
                size = self._list.check(context, record, self._match_key)
                require(size > self.low, context, f"MAP mode at size {size} <= low {self.low}")
                in_map_mode.add(context)
            else:
                size = check_record(context, record, self._match_key)
                require(size < self.high, context, f"VALUE mode at size {size} >= high {self.high}")
        for state in ("nodes", "index"):
            orphans = set(self.backend.map_state(state).contexts()) - in_map_mode
            require(not orphans, min(orphans, default=b""), f"{state} entries of a key not in MAP mode")

    def _elements(self, context: bytes) -> list[tuple[StoredRow, int]]:
        record = self._records.get(context)
        if record is None:
            return []
        if is_map_mode(record):
            return self._list.elements(context, record)
        return record_elements(record)

    def _newest_elements(self, context: bytes, limit: int) -> tuple[list[tuple[StoredRow, int]], bool]:
        """VALUE mode: the record sliced (one read); MAP mode: the last ``limit`` nodes."""
        record = self._records.get(context)
        if record is not None and is_map_mode(record):
            return self._list.newest(context, record, limit)
        elements = [] if record is None else record_elements(record)
        return elements[-limit:], len(elements) > limit

    def _drop(self, context: bytes) -> None:
        record = self._records.get(context)
        if record is not None and is_map_mode(record):
            self._list.drop(context)
        self._records.delete(context)

    def _load(self, context: bytes, elements: list[tuple[StoredRow, int]]) -> None:
        rows = [row for row, _ in elements]
        stamps = [stamp for _, stamp in elements]
        record = self._new_record(rows, stamps, [self._match_key(row) for row in rows])
        if len(rows) >= self.high:
            self._records.put(context, self._to_map(context, record))
        else:
            self._records.put(context, record)
            for stamp in set(stamps):
                self._stamped(context, 0, stamp)
