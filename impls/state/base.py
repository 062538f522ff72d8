"""The keyed-state interfaces strategies are written against.

A *context key* is the canonical encoding (bytes) of the sink-PK projection; *user keys*
inside a map are bytes too (match keys, order-preserving encodings of sequence numbers).
Values are plain msgpack-able structures (None, bool, int, float, str, bytes, lists, dicts);
byte backends serialize them with msgpack, never pickle, and hand back lists where a
tuple was stored. Each method call is one state access (what complexity tests count).

A backend groups the writes of one input into one atomic *unit*: strategies call
:meth:`StateBackend.commit` when an input is fully applied, and reads see the uncommitted
writes (read-your-writes). When an input raises half-way, strategies call
:meth:`StateBackend.rollback`, which undoes the writes of that unit and nothing before it.
Byte backends write every unit durably at once, or with a commit interval N one batch per N
units (``execution.checkpointing.interval``; :mod:`.deferred`); :meth:`StateBackend.checkpoint`
writes what is pending now.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, TypeAlias

Value = Any  # a msgpack-able structure
UserKey: TypeAlias = Any
"""A map state's user key: bytes (match keys, ``encode_seq`` seqs). The heap layouts key
their own nodes by int seqs instead (ints order as their ``encode_seq`` bytes do), which
only heap state ever holds; annotated ``Any`` so that compiled code checks neither."""


class ValueState(Protocol):
    """One value per context key."""

    def get(self, context: bytes) -> Value | None:
        """The value of ``context``, or None if it has none. One read."""
        ...

    def put(self, context: bytes, value: Value) -> None:
        """Set the value of ``context``. One write."""
        ...

    def delete(self, context: bytes) -> None:
        """Remove the value of ``context`` (no-op if absent). One write."""
        ...

    def contexts(self) -> Iterator[bytes]:
        """Every context key holding a value (scan; not for the hot path)."""
        ...


class MapState(Protocol):
    """A map of user key -> value per context key; iteration order unspecified."""

    def get(self, context: bytes, key: UserKey) -> Value | None:
        """One read."""
        ...

    def put(self, context: bytes, key: UserKey, value: Value) -> None:
        """One write."""
        ...

    def delete(self, context: bytes, key: UserKey) -> None:
        """One write; no-op if absent."""
        ...

    def items(self, context: bytes) -> Iterator[tuple[UserKey, Value]]:
        """Every entry of ``context`` (scan)."""
        ...

    def clear(self, context: bytes) -> None:
        """Remove every entry of ``context``."""
        ...

    def contexts(self) -> Iterator[bytes]:
        """Every context key holding at least one entry (scan; not for the hot path)."""
        ...


class SortedMapState(MapState, Protocol):
    """A MapState whose entries iterate in ascending byte order of the user key."""

    def last(self, context: bytes) -> tuple[UserKey, Value] | None:
        """The entry with the greatest user key (a reverse seek). One read."""
        ...

    def first(self, context: bytes) -> tuple[UserKey, Value] | None:
        """The entry with the smallest user key. One read."""
        ...

    def before(self, context: bytes, key: UserKey) -> tuple[UserKey, Value] | None:
        """The entry with the greatest user key strictly below ``key``. One read."""
        ...

    def ceiling(self, context: bytes, key: UserKey) -> tuple[UserKey, Value] | None:
        """The entry with the smallest user key at or above ``key`` (a forward seek). One read."""
        ...


class StateBackend(Protocol):
    """Creates the named states of one operator instance and commits their writes."""

    name: str
    supports_ordered: bool

    def value_state(self, name: str) -> ValueState:
        """The value state called ``name`` (created on first use)."""
        ...

    def map_state(self, name: str) -> MapState:
        """The map state called ``name``."""
        ...

    def sorted_map_state(self, name: str) -> SortedMapState:
        """The ordered map state called ``name``; only where ``supports_ordered``."""
        ...

    def commit(self) -> None:
        """End the current unit: its writes are atomic, durable now or at the next durable
        commit of the backend's interval."""
        ...

    def checkpoint(self) -> None:
        """Make every write so far durable now, atomically, and end the current unit (called
        between inputs, so that is every input so far; nothing to write where nothing is
        pending or nothing is durable)."""
        ...

    def rollback(self) -> None:
        """Undo the writes of the current unit (an input that raised leaves no trace)."""
        ...

    def close(self) -> None:
        """Commit nothing further, release files and locks."""
        ...
