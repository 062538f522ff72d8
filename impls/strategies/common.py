"""What every fast strategy shares: the per-input shell around a state layout.

A strategy subclass supplies ``_add`` and ``_retract`` for one context key; this shell
computes the per-event values once (context key, match key, stamp), counts and logs rule-7
misses, and commits the backend once per input so each input's state change is atomic.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator

from ...spec import Change, Keys, Row
from ..settings import Settings, TimeDomain
from ..state import CorruptStateError, StateBackend
from ..state.codec import decode_seq, encode_seq

__all__ = [
    "StrategyBase",
    "UnsupportedSettingError",
    "check_settings",
    "decode_seq",
    "encode_seq",
    "missing",
    "same_chains",
]

log = logging.getLogger("upsertmat")


class UnsupportedSettingError(ValueError):
    """The settings ask for something this strategy does not implement (yet)."""


def check_settings(settings: Settings, strategy: str) -> None:
    """Refuse settings the strategies cannot honour: TTL arrives with the next issue.

    Raises UnsupportedSettingError rather than silently ignoring ``table.exec.state.ttl``.
    """
    if settings.ttl.enabled:
        raise UnsupportedSettingError(
            f"strategy {strategy} does not implement state TTL yet "
            f"(table.exec.state.ttl = {settings.ttl.ttl_ms} ms); set it to 0 or use another strategy"
        )


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
    """The ``Materializer`` shell of VALUE, MAP, SORTED and ADAPTIVE.

    Per input: one context-key and one match-key computation, the layout's state accesses,
    and one ``backend.commit()``. Stamps: the processing-time clock (``advance_time``), or in
    the event-time domain the change's ``ts`` when it has one.
    """

    strategy_name = "?"

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        check_settings(settings, self.strategy_name)
        self.keys = keys
        self.backend = backend
        self.retract_misses = 0
        self._now = 0
        self._event_time = settings.ttl.time_domain is TimeDomain.EVENT_TIME
        self._upsert = keys.has_upsert_key
        self._context_key = keys.context_key
        self._match_key = keys.match_key

    def process(self, change: Change) -> Change | None:
        """Rules 1-11 for one input; the state change is committed before returning."""
        row = change.row
        context = self._context_key(row)
        match = self._match_key(row)
        emitted: Change | None
        if change.kind.is_add:
            ts = change.ts
            stamp = ts if self._event_time and ts is not None else self._now
            emitted = self._add(context, match, row, stamp)
        else:
            emitted = self._retract(context, match, change)
        self.backend.commit()
        return emitted

    @abstractmethod
    def _add(self, context: bytes, match: bytes, row: Row, stamp: int) -> Change:
        """Apply an ADD (rules 3-5) to ``context``; return the ``+I``/``+U`` to emit."""

    @abstractmethod
    def _retract(self, context: bytes, match: bytes, change: Change) -> Change | None:
        """Apply a RETRACT (rules 6-10) to ``context``; call :meth:`_miss` on rule 7."""

    def _miss(self, context: bytes, change: Change) -> None:
        """Rule 7: count the retraction that matched nothing and log a warning."""
        self.retract_misses += 1
        log.warning(
            "retraction matched no stored row (context key %s): %r",
            context.decode("utf-8", "replace"),
            change,
        )

    def advance_time(self, now: int) -> None:
        """Move the clock; later writes are stamped with it (processing-time domain)."""
        if now > self._now:
            self._now = now

    def histories(self) -> Iterator[tuple[bytes, list[Row]]]:
        """Every non-empty context key with its rows in insertion order (a full scan)."""
        for context in self._contexts():
            rows = [row for row, _ in self.elements(context)]
            if rows:
                yield context, rows

    def elements(self, context: bytes) -> list[tuple[Row, int]]:
        """The stored rows of ``context`` with their timestamps, in insertion order. O(n)."""
        return self._elements(context)

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Replace the rows of each given context key (an empty list removes the key).

        Elements are stamped with the current clock; committed once at the end.
        """
        for context, rows in histories:
            self._drop(context)
            if rows:
                self._load(context, [tuple(row) for row in rows])
        self.backend.commit()

    @abstractmethod
    def _contexts(self) -> list[bytes]:
        """Every context key that may hold rows (a scan)."""

    @abstractmethod
    def _elements(self, context: bytes) -> list[tuple[Row, int]]:
        """(row, stamp) of every element of ``context`` in insertion order (a scan of one key)."""

    @abstractmethod
    def _drop(self, context: bytes) -> None:
        """Remove every stored element of ``context``."""

    @abstractmethod
    def _load(self, context: bytes, rows: list[Row]) -> None:
        """Store ``rows`` (non-empty) as the whole history of an empty ``context``."""

    def close(self) -> None:
        """Close the backend (files, locks); the materializer is unusable afterwards."""
        self.backend.close()
