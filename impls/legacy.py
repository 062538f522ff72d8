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

from ..spec import Change, Keys, Row, RowKind
from .config import TTL, UnsupportedSetting
from .settings import Backend, Settings
from .state import StateBackend, open_backend

log = logging.getLogger("upsertmat")


class LegacyMaterializer:
    """The LEGACY strategy on any backend: one value state ``legacy`` holding each key's rows.

    Per event: 1 state read, at most 1 state write or delete, one match-key computation per
    stored row scanned, and one ``backend.commit()`` (so each input's change is atomic on
    durable backends). ``close`` closes the backend.
    """

    def __init__(self, keys: Keys, backend: StateBackend) -> None:
        self.keys = keys
        self.retract_misses = 0
        self.backend = backend
        self._state = backend.value_state("legacy")
        self._now = 0

    def process(self, change: Change) -> Change | None:
        """Rules 1-11 on the key's stored list, committed as one unit."""
        emitted = self._apply(change)
        self.backend.commit()
        return emitted

    def _apply(self, change: Change) -> Change | None:
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
            return Change(RowKind.DELETE, change.row)
        self._state.put(context, rows)
        return Change(RowKind.UPDATE_AFTER, rows[-1]) if removed_last else None

    def _find(self, rows: list[Row], wanted: bytes) -> int:
        """Index of the first row whose match key is ``wanted``, or -1. O(len(rows))."""
        match_key = self.keys.match_key
        for index, row in enumerate(rows):
            if match_key(row) == wanted:
                return index
        return -1

    def advance_time(self, now: int) -> None:
        """Record the clock; LEGACY without TTL has nothing time-dependent."""
        self._now = max(self._now, now)

    def histories(self) -> Iterator[tuple[bytes, list[Row]]]:
        """Every non-empty context key with its rows in insertion order (a full scan)."""
        for context in self._state.contexts():
            yield context, [tuple(row) for row in self._state.get(context) or ()]

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Replace the stored rows of each given context key (used to restore state)."""
        for context, rows in histories:
            if rows:
                self._state.put(context, [tuple(row) for row in rows])
            else:
                self._state.delete(context)
        self.backend.commit()

    def close(self) -> None:
        """Close the backend (releases a state directory's files and lock)."""
        self.backend.close()


def _create(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on ``settings.backend``. UnsupportedSetting if TTL is on (not implemented yet)."""
    if settings.ttl.enabled:
        raise UnsupportedSetting(
            f"TTL ({TTL}) is not implemented for LEGACY/{settings.backend.value} yet; "
            f"set it to 0 (got {settings.ttl.ttl_ms} ms)"
        )
    return LegacyMaterializer(keys, open_backend(settings))


def create_heap(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on the heap backend."""
    return _create(keys, replace(settings, backend=Backend.HEAP))


def create_rocksdb(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on RocksDB (``settings.state_dir``, or a temporary database)."""
    return _create(keys, replace(settings, backend=Backend.ROCKSDB))


def create_lmdb(keys: Keys, settings: Settings) -> LegacyMaterializer:
    """LEGACY on LMDB (``settings.state_dir``, or a temporary environment)."""
    return _create(keys, replace(settings, backend=Backend.LMDB))
