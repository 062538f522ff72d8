"""What every fast strategy shares: the per-input shell around a state layout.

A strategy subclass supplies ``_add`` and ``_retract`` for one context key; this shell
computes the per-event values once (context key, match key, stamp), counts and logs rule-7
misses, and commits the backend once per input so each input's state change is atomic.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator

from ...spec import Change, Element, Keys, Row, UpdateType
from ..settings import Settings
from ..state import CorruptStateError, StateBackend
from ..state.codec import decode_seq, encode_seq
from ..state.errors import storage_failure
from .timers import Timers

__all__ = [
    "StrategyBase",
    "decode_seq",
    "encode_seq",
    "missing",
    "same_chains",
]

log = logging.getLogger("upsertmat")


def missing(state: str, context: bytes, seq: int) -> CorruptStateError:
    """The error for a node the layout's invariants say exists but the state lacks."""
    return CorruptStateError(
        f"state {state!r} lacks node {seq} of context key {context.decode('utf-8', 'replace')} "
        "(damaged state, or written by another strategy)"
    )


def same_chains(matches: list[bytes]) -> tuple[list[int], dict[bytes, list[int]]]:
    """Same-match-key chains of a history whose element ``i`` gets sequence number ``i + 1``.

    Returns ``(same, entries)``: ``same[i]`` is the seq of the next element with the match key
    of element ``i`` (0 if none); ``entries`` maps each match key to ``[first, last]`` seq. O(n).
    """
    same = [0] * len(matches)
    entries: dict[bytes, list[int]] = {}
    for position, match in enumerate(matches):
        seq = position + 1
        entry = entries.get(match)
        if entry is None:
            entries[match] = [seq, seq]
        else:
            same[entry[1] - 1] = seq
            entry[1] = seq
    return same, entries


class StrategyBase(ABC):
    """The ``Materializer`` and ``StateTransfer`` shell of VALUE, MAP, SORTED and ADAPTIVE.

    Per input: one context-key and one match-key computation, the layout's state accesses,
    and one ``backend.commit()``. Stamps: the processing-time clock (``advance_time``), or in
    the event-time domain the change's ``ts`` (required when TTL is on).

    Per-element TTL (docs/ttl.md): every stamp written also writes a timer
    (:class:`~.timers.Timers`); expiry runs the due timers, each re-checking its element and
    removing it if ``now >= stamp + ttl`` (:meth:`_expire_element`). It runs in
    ``advance_time`` (the only place ``now`` moves) and after an input whose own stamp is
    already expired (a late event-time record), so after every call the physical state holds
    exactly the visible elements and rules 1-11 run on stored state unchanged. Without TTL
    none of this runs (no timer state is touched).
    """

    strategy_name = "?"

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.keys = keys
        self.backend = backend
        self.retract_misses = 0
        self._now = 0
        self._ttl = settings.ttl
        self._ttl_ms = settings.ttl.ttl_ms
        self._timers = Timers(backend) if settings.ttl.enabled else None
        self._restamp_replaced = settings.ttl.update_type is not UpdateType.ON_CREATE
        self._restamp_rollback = settings.ttl.update_type is UpdateType.ON_READ_AND_WRITE
        self._upsert = keys.has_upsert_key
        self._context_key = keys.context_key
        self._match_key = keys.match_key

    @property
    def now(self) -> int:
        """The clock: the greatest time passed to ``advance_time`` (or imported)."""
        return self._now

    def process(self, change: Change) -> Change | None:
        """Rules 1-11 for one input; the state change is committed before returning.

        If anything raises half-way, every write of this input is rolled back (state, clock
        hints and the miss counter are as before the call) and the error propagates.
        """
        stamp = self._ttl.stamp_of(change.ts, self._now)  # may raise: before any state change
        row = change.row
        misses = self.retract_misses
        try:
            context = self._context_key(row)
            match = self._match_key(row)
            emitted: Change | None
            if change.kind.is_add:
                emitted = self._add(context, match, row, stamp)
            else:
                emitted = self._retract(context, match, change, stamp)
            if self._timers is not None and stamp + self._ttl_ms <= self._now:
                self._expire_due()  # a late record: what it just wrote is already invisible
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

    @abstractmethod
    def _add(self, context: bytes, match: bytes, row: Row, stamp: int) -> Change:
        """Apply an ADD (rules 3-5) to ``context``; return the ``+I``/``+U`` to emit.

        A rule-4 replacement takes ``stamp`` only when ``_restamp_replaced``; call
        :meth:`_stamped` for every stamp written.
        """

    @abstractmethod
    def _retract(self, context: bytes, match: bytes, change: Change, stamp: int) -> Change | None:
        """Apply a RETRACT (rules 6-10) to ``context``; call :meth:`_miss` on rule 7.

        When ``_restamp_rollback``, the element emitted by rule 9 takes ``stamp``.
        """

    def _stamped(self, context: bytes, seq: int, stamp: int) -> None:
        """Record that element ``seq`` of ``context`` now carries ``stamp`` (a timer). TTL only."""
        if self._timers is not None:
            self._timers.add(stamp + self._ttl_ms, context, seq)

    def _expired(self, stamp: int) -> bool:
        """``now >= stamp + ttl`` (TTL on)."""
        return self._now >= stamp + self._ttl_ms

    def _expire_due(self) -> int:
        """Run every due timer; returns how many fired. Amortised O(1) accesses per write."""
        assert self._timers is not None
        fired = 0
        for context, seq in self._timers.pop_due(self._now):
            self._expire_element(context, seq)
            fired += 1
        return fired

    @abstractmethod
    def _expire_element(self, context: bytes, seq: int) -> None:
        """A timer for element ``seq`` of ``context`` fired: remove what is expired there."""

    def _miss(self, context: bytes, change: Change) -> None:
        """Rule 7: count the retraction that matched nothing and log a warning."""
        self.retract_misses += 1
        log.warning(
            "retraction matched no stored row (context key %s): %r",
            context.decode("utf-8", "replace"),
            change,
        )

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
        for context in self._contexts():
            rows = [row for row, _ in self.elements(context)]
            if rows:
                yield context, rows

    def elements(self, context: bytes) -> list[Element]:
        """The stored rows of ``context`` with their timestamps, in insertion order. O(n)."""
        return self._elements(context)

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Replace the rows of each given context key (an empty list removes the key).

        Elements are stamped with the current clock; committed once at the end.
        """
        self._import((context, [(tuple(row), self._now) for row in rows]) for context, rows in histories)

    def export_elements(self) -> Iterator[tuple[bytes, list[Element]]]:
        """Every non-empty context key with its elements in insertion order (a full scan)."""
        for context in self._contexts():
            elements = self._elements(context)
            if elements:
                yield context, elements

    def import_elements(self, items: Iterable[tuple[bytes, list[Element]]], now: int) -> None:
        """Set the elements of each given key (empty removes it) and the clock to ``now``.

        Imported stamps get timers; elements already expired at ``now`` are removed at once.
        """
        self._now = now
        self._import(items)

    def _import(self, items: Iterable[tuple[bytes, list[Element]]]) -> None:
        for context, elements in items:
            self._drop(context)
            if elements:
                self._load(context, [(tuple(row), stamp) for row, stamp in elements])
        if self._timers is not None:
            self._expire_due()
        self.backend.commit()

    def stats(self) -> dict[str, int]:
        """``keys`` and ``elements`` stored (= visible: expiry is eager at every call) and
        ``timers`` pending (physical TTL entries; stale ones included). A full scan."""
        keys = elements = 0
        for _, stored in self.export_elements():
            keys += 1
            elements += len(stored)
        return {
            "keys": keys,
            "elements": elements,
            "timers": 0 if self._timers is None else self._timers.count(),
        }

    @abstractmethod
    def _contexts(self) -> list[bytes]:
        """Every context key that may hold rows (a scan)."""

    @abstractmethod
    def _elements(self, context: bytes) -> list[Element]:
        """(row, stamp) of every element of ``context`` in insertion order (a scan of one key)."""

    @abstractmethod
    def _drop(self, context: bytes) -> None:
        """Remove every stored element of ``context``."""

    @abstractmethod
    def _load(self, context: bytes, elements: list[Element]) -> None:
        """Store ``elements`` (non-empty) as the whole history of an empty ``context``,
        with a timer per stamp (:meth:`_stamped`)."""

    def close(self) -> None:
        """Close the backend (files, locks); the materializer is unusable afterwards."""
        self.backend.close()
