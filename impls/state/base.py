"""The keyed-state interfaces strategies are written against.

A *context key* is the canonical encoding (bytes) of the sink-PK projection. Every call is
one state access; backends count nothing themselves, wrappers may.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

V = TypeVar("V")


class ValueState(Protocol[V]):
    """One value per context key."""

    def get(self, context: bytes) -> V | None:
        """The value of ``context``, or None if it has none. One state read."""
        ...

    def put(self, context: bytes, value: V) -> None:
        """Set the value of ``context``. One state write."""
        ...

    def delete(self, context: bytes) -> None:
        """Remove the value of ``context`` (no-op if absent). One state write."""
        ...

    def __len__(self) -> int:
        """How many context keys hold a value."""
        ...
