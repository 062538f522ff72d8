"""The contract every materializer implementation fulfils (the model included)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

from .changes import Change, Row


@runtime_checkable
class Materializer(Protocol):
    """A sink upsert materializer over many context keys.

    ``process`` feeds one input change (its ``ts`` is the event timestamp, if any) and returns
    the single emitted change or None (rule 11). ``advance_time`` moves the clock: processing
    time, or the watermark in event-time mode. ``retract_misses`` counts rule-7 retractions.
    ``close`` releases resources (files, locks); the object is unusable afterwards.
    """

    @property
    def retract_misses(self) -> int: ...

    def process(self, change: Change) -> Change | None: ...

    def advance_time(self, now: int) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class HistoryAccess(Protocol):
    """Optional: export and import the whole state as per-key histories.

    The canonical (backend-independent) view of the state: for every non-empty context key,
    its stored rows in insertion order. What ``replay --state-dir`` persists for heap
    implementations, and the seed of the savepoint format.
    """

    def histories(self) -> Iterator[tuple[bytes, list[Row]]]:
        """Every non-empty context key with its rows in insertion order."""
        ...

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Set the rows of each given context key (an empty list removes the key)."""
        ...
