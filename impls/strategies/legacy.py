"""LEGACY: the original design — one value per context key holding the whole row list.

Every event reads the key's list, scans it, and writes it back: O(n) work and O(n) bytes
moved per event for a history of n rows, which is why long histories collapse throughput.
Kept because it is the baseline the other strategies are measured against, and because it
is what existing state looks like before a migration.
"""

from __future__ import annotations

from collections.abc import Iterator

from mypy_extensions import mypyc_attr

from ...spec import Change, Element, Granularity, Keys, UpdateType
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state import StateBackend
from .common import DELETE, INSERT, UPDATE_AFTER, StrategyBase, emit, require


@mypyc_attr(allow_interpreted_subclasses=True)
class LegacyMaterializer(StrategyBase):
    """The LEGACY strategy on any backend: one value state ``legacy`` holding each key's rows.

    Per event: 1 state read, at most 1 state write or delete, one match-key computation per
    stored row scanned, and one ``backend.commit()`` (so each input's change is atomic on
    durable backends). ``close`` closes the backend.

    Per-key TTL (docs/ttl.md; ``granularity`` is ``per_key``), only when ``settings.ttl`` is
    on: a second value state ``legacy_ttl`` holds each key's stamp, set by every successful
    write (an ADD, or a RETRACT that matched; under ``on_create`` only by the ADD that
    creates the key), and each stamp written arms a timer (element seq 0). Timers run in
    ``advance_time`` and after an input while any is due, at most ``expiry_budget`` per call
    (docs/ttl.md), and delete a key whose stamp is expired. While that sweep lags, an input
    first reads its key's stamp and drops the key if it is expired (:meth:`_live_rows`), and
    exports skip expired keys, so outputs are those of an eager sweep. +1 write and +1 timer
    write per event (+1 read while the sweep lags).

    The shell (per input, clock, stamps, timers, histories, transfer, stats, misses, close)
    is :class:`~.strategies.common.StrategyBase`'s; the layout is ``_add``/``_retract`` on the
    whole list.
    """

    strategy_name = "LEGACY"
    granularity = Granularity.PER_KEY

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        super().__init__(keys, backend, settings)
        self._state = self._value_state("legacy")
        self._on_create = settings.ttl.update_type is UpdateType.ON_CREATE
        self._stamps = backend.value_state("legacy_ttl") if settings.ttl.enabled else None

    def _written(self, context: bytes, created: bool, stamp: int) -> None:
        """A successful write to a non-empty key: set its stamp per the update policy."""
        if self._stamps is None or (self._on_create and not created):
            return
        self._stamps.put(context, stamp)
        self._stamped(context, 0, stamp)

    def _rows(self, context: bytes) -> list[StoredRow]:
        return [tuple(row) for row in self._state.get(context) or ()]

    def _live_rows(self, context: bytes) -> list[StoredRow]:
        """The key's rows; while the expiry sweep lags, an expired key is dropped here and
        reads as empty (+1 read of its stamp; +2 deletes if it was expired)."""
        if self._lazy and self._stamps is not None:
            stamp = self._stamps.get(context)
            if stamp is not None and self._expired(stamp):
                self._drop(context)
                self._note_expired(context)
                return []
        return self._rows(context)

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        rows = self._live_rows(context)
        emitted = emit(UPDATE_AFTER if rows else INSERT, row)
        index = self._find(rows, match) if self._upsert else -1
        if index < 0:
            rows.append(row)
        else:
            rows[index] = row
        self._state.put(context, rows)
        self._written(context, emitted.kind is INSERT, stamp)
        return emitted

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        rows = self._live_rows(context)
        index = self._find(rows, match)
        if index < 0:
            self._miss(context, change)
            return None
        removed_last = index == len(rows) - 1
        del rows[index]
        if not rows:
            self._drop(context)
            return emit(DELETE, change.row)
        self._state.put(context, rows)
        self._written(context, False, stamp)
        return emit(UPDATE_AFTER, rows[-1]) if removed_last else None

    def _find(self, rows: list[StoredRow], wanted: bytes) -> int:
        """Index of the first row whose match key is ``wanted``, or -1. O(len(rows))."""
        match_key = self._match_key
        for index, row in enumerate(rows):
            if match_key(row) == wanted:
                return index
        return -1

    def _expire_element(self, context: bytes, seq: int) -> None:
        """A timer of ``context`` fired: delete the key if its stamp is expired."""
        if self._stamps is None:
            return
        stamp = self._stamps.get(context)
        if stamp is not None and self._expired(stamp):
            self._drop(context)
            self._note_expired(context)

    def _contexts(self) -> list[bytes]:
        return list(self._state.contexts())

    def _elements(self, context: bytes) -> list[Element]:
        """Every row of ``context``, each carrying the key's stamp (0 without TTL)."""
        rows = self._rows(context)
        stamp = 0 if self._stamps is None or not rows else self._stamps.get(context) or 0
        return [(row, stamp) for row in rows]

    def _drop(self, context: bytes) -> None:
        self._state.delete(context)
        if self._stamps is not None:
            self._stamps.delete(context)

    def _load(self, context: bytes, elements: list[Element]) -> None:
        """The key's rows, and its stamp: the greatest element stamp (per-key TTL)."""
        self._state.put(context, [tuple(row) for row, _ in elements])
        if self._stamps is not None:
            stamp = max(stamp for _, stamp in elements)
            self._stamps.put(context, stamp)
            self._stamped(context, 0, stamp)

    def _check(self) -> None:
        """Every stored value is a non-empty row list; with TTL, exactly the stored keys
        have a stamp. O(state)."""
        contexts = set(self._state.contexts())
        for context in contexts:
            rows = self._state.get(context)
            require(isinstance(rows, list | tuple) and len(rows) >= 1, context, "an empty history is stored")
        if self._stamps is not None:
            stamped = set(self._stamps.contexts())
            require(
                stamped == contexts,
                min(stamped ^ contexts, default=b""),
                "a stamp without rows or rows without",
            )

    def histories(self) -> Iterator[tuple[bytes, list[StoredRow]]]:
        """Every non-empty context key with its visible rows in insertion order (a full scan)."""
        if self._stamps is not None:  # a key still stored may be expired
            yield from super().histories()
            return
        for context in self._contexts():
            rows = self._rows(context)
            if rows:
                yield context, rows
