"""The contract every materializer implementation fulfils (the model included)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .changes import Change


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
