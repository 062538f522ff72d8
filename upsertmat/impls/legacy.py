"""LEGACY: the original design — one value per context key holding the whole row list.

Every event reads the key's list, scans it, and writes it back: O(n) work and O(n) bytes
moved per event for a history of n rows, which is why long histories collapse throughput.
Kept because it is the baseline the other strategies are measured against, and because it
is what existing state looks like before a migration.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import replace

from ..spec import Change, Element, Keys, Row, RowKind, UpdateType
from .settings import Backend, Settings
from .state import StateBackend, open_backend
from .state.errors import storage_failure
from .strategies.timers import Timers

log = logging.getLogger("upsertmat")


class LegacyMaterializer:
    """The LEGACY strategy on any backend: one value state ``legacy`` holding each key's rows.

    Per event: 1 state read, at most 1 state write or delete, one match-key computation per
    stored row scanned, and one ``backend.commit()`` (so each input's change is atomic on
    durable backends). ``close`` closes the backend.

    Per-key TTL (docs/ttl.md), only when ``settings.ttl`` is on: a second value state
    ``legacy_ttl`` holds each key's stamp, set by every successful write (an ADD, or a
    RETRACT that matched; under ``on_create`` only by the ADD that creates the key), and each
    stamp written arms a timer. Timers run in ``advance_time`` (and after a late event-time
    input) and delete a key whose stamp is expired, so the stored state is exactly the
    visible state after every call. +1 read, +1 write and +1 timer write per event.
    """

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.keys = keys
        self.retract_misses = 0
        self.backend = backend
        self._state = backend.value_state("legacy")
        self._now = 0
        self._ttl = settings.ttl
        self._on_create = settings.ttl.update_type is UpdateType.ON_CREATE
        self._stamps = backend.value_state("legacy_ttl") if settings.ttl.enabled else None
        self._timers = Timers(backend) if settings.ttl.enabled else None

    @property
    def now(self) -> int:
        """The clock: the greatest time passed to ``advance_time`` (or imported)."""
        return self._now

    def process(self, change: Change) -> Change | None:
        """Rules 1-11 on the key's stored list, committed as one unit (rolled back if it raises)."""
        stamp = self._ttl.stamp_of(change.ts, self._now)  # may raise: before any state change
        misses = self.retract_misses
        try:
            emitted = self._apply(change, stamp)
            if self._timers is not None and stamp + self._ttl.ttl_ms <= self._now:
                self._expire_due()  # a late record: the key it just wrote is already invisible
            self.backend.commit()
        except BaseException as error:
            self._roll_back(misses)
            failure = storage_failure(self.backend, error)
            if failure is not None and failure is not error:
                raise failure from error
            raise
        return emitted

    def _roll_back(self, misses: int) -> None:
        """Undo the uncommitted writes of a failed call; forget in-memory hints derived from them."""
        self.backend.rollback()
        self.retract_misses = misses
        if self._timers is not None:
            self._timers.forget_hints()

    def _written(self, context: bytes, created: bool, stamp: int) -> None:
        """A successful write to a non-empty key: set its stamp per the update policy."""
        if self._stamps is None or self._timers is None or (self._on_create and not created):
            return
        self._stamps.put(context, stamp)
        self._timers.add(stamp + self._ttl.ttl_ms, context)

    def _apply(self, change: Change, stamp: int) -> Change | None:
        context = self.keys.context_key(change.row)
        rows: list[Row] = [tuple(row) for row in self._state.get(context) or ()]
        wanted = self.keys.match_key(change.row)
        if change.kind.is_add:
            emitted = Change(RowKind.UPDATE_AFTER if rows else RowKind.INSERT, change.row)
            index = self._find(rows, wanted) if self.keys.has_upsert_key else -1
            if index < 0:
                rows.append(change.row)
            else:
                rows[index] = change.row
            self._state.put(context, rows)
            self._written(context, emitted.kind is RowKind.INSERT, stamp)
            return emitted
        index = self._find(rows, wanted)
        if index < 0:
            self.retract_misses += 1
            log.warning("retraction matched no stored row: %r", change)
            return None
        removed_last = index == len(rows) - 1
        del rows[index]
        if not rows:
            self._state.delete(context)
            if self._stamps is not None:
                self._stamps.delete(context)
            return Change(RowKind.DELETE, change.row)
        self._state.put(context, rows)
        self._written(context, False, stamp)
        return Change(RowKind.UPDATE_AFTER, rows[-1]) if removed_last else None

    def _find(self, rows: list[Row], wanted: bytes) -> int:
        """Index of the first row whose match key is ``wanted``, or -1. O(len(rows))."""
        match_key = self.keys.match_key
        for index, row in enumerate(rows):
            if match_key(row) == wanted:
                return index
        return -1

    def _expire_due(self) -> int:
        """Run the due timers: delete each key whose stamp is expired. Returns timers fired."""
        assert self._timers is not None and self._stamps is not None
        fired = 0
        for context, _ in self._timers.pop_due(self._now):
            fired += 1
            stamp = self._stamps.get(context)
            if stamp is not None and self._now >= stamp + self._ttl.ttl_ms:
                self._stamps.delete(context)
                self._state.delete(context)
        return fired

    def advance_time(self, now: int) -> None:
        """Move the clock (a time in the past is ignored); with TTL, expire what is due.

        If expiry raises, its writes are rolled back and the clock keeps its old value.
        """
        if now > self._now:
            previous = self._now
            self._now = now
            try:
                if self._timers is not None and self._expire_due():
                    self.backend.commit()
            except BaseException as error:
                self._now = previous
                self._roll_back(self.retract_misses)
                failure = storage_failure(self.backend, error)
                if failure is not None and failure is not error:
                    raise failure from error
                raise

    def histories(self) -> Iterator[tuple[bytes, list[Row]]]:
        """Every non-empty context key with its rows in insertion order (a full scan)."""
        for context, elements in self.export_elements():
            yield context, [row for row, _ in elements]

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Replace the stored rows of each given context key (stamped with the clock)."""
        self._import((context, [(tuple(row), self._now) for row in rows]) for context, rows in histories)

    def export_elements(self) -> Iterator[tuple[bytes, list[Element]]]:
        """Every non-empty key with its rows, each carrying the key's stamp (0 without TTL)."""
        for context in self._state.contexts():
            rows = [tuple(row) for row in self._state.get(context) or ()]
            stamp = 0 if self._stamps is None else self._stamps.get(context) or 0
            if rows:
                yield context, [(row, stamp) for row in rows]

    def import_elements(self, items: Iterable[tuple[bytes, list[Element]]], now: int) -> None:
        """Set each given key's rows (empty removes it), its stamp to the greatest element
        stamp, and the clock to ``now``; keys already expired at ``now`` vanish at once."""
        self._now = now
        self._import(items)

    def _import(self, items: Iterable[tuple[bytes, list[Element]]]) -> None:
        for context, elements in items:
            if not elements:
                self._state.delete(context)
                if self._stamps is not None:
                    self._stamps.delete(context)
                continue
            self._state.put(context, [tuple(row) for row, _ in elements])
            if self._stamps is not None and self._timers is not None:
                stamp = max(stamp for _, stamp in elements)
                self._stamps.put(context, stamp)
                self._timers.add(stamp + self._ttl.ttl_ms, context)
        if self._timers is not None:
            self._expire_due()
        self.backend.commit()

    def stats(self) -> dict[str, int]:
        """``keys`` and ``elements`` stored (= visible: expiry is eager at every call) and
        ``timers`` pending (stale ones included). A full scan."""
        keys = elements = 0
        for _, rows in self.export_elements():
            keys += 1
            elements += len(rows)
        return {
            "keys": keys,
            "elements": elements,
            "timers": 0 if self._timers is None else self._timers.count(),
        }

    def close(self) -> None:
        """Close the backend (releases a state directory's files and lock)."""
        self.backend.close()


def _create(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on ``settings.backend`` (per-key TTL when ``settings.ttl`` is on)."""
    return LegacyMaterializer(keys, open_backend(settings), settings)


def create_heap(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on the heap backend."""
    return _create(keys, replace(settings, backend=Backend.HEAP))


def create_rocksdb(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on RocksDB (``settings.state_dir``, or a temporary database)."""
    return _create(keys, replace(settings, backend=Backend.ROCKSDB))


def create_lmdb(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on LMDB (``settings.state_dir``, or a temporary environment)."""
    return _create(keys, replace(settings, backend=Backend.LMDB))
