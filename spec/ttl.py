"""State retention (TTL) settings and the visibility rule (docs/ttl.md).

``ttl_ms == 0`` means off. ``now`` is the latest time passed to ``advance_time``; a stamped
thing (an element, or a whole key's history under per-key TTL) is visible while
``now < stamp + ttl_ms`` and invisible from the instant ``now >= stamp + ttl_ms``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class TimeDomain(enum.Enum):
    """``upsertmat.state.ttl.time-domain``: where ``now`` and stamps come from."""

    PROCESSING_TIME = "processing_time"
    """``now`` is the injectable processing-time clock; writes are stamped with ``now``."""
    EVENT_TIME = "event_time"
    """``now`` is the watermark; writes are stamped with the change's ``ts`` (required)."""


class UpdateType(enum.Enum):
    """``upsertmat.state.ttl.update-type``: which accesses (re-)stamp an element or key."""

    ON_CREATE_AND_WRITE = "on_create_and_write"
    ON_CREATE = "on_create"
    ON_READ_AND_WRITE = "on_read_and_write"


class Granularity(enum.Enum):
    """What carries a stamp: the whole history of a key (LEGACY) or each element."""

    PER_KEY = "per_key"
    PER_ELEMENT = "per_element"


class MissingTimestampError(ValueError):
    """An event-time TTL operator received a change without ``ts``."""


@dataclass(frozen=True)
class TtlSettings:
    """State retention; ``ttl_ms == 0`` means off."""

    ttl_ms: int = 0
    time_domain: TimeDomain = TimeDomain.PROCESSING_TIME
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE

    def __post_init__(self) -> None:
        if self.ttl_ms < 0:
            raise ValueError(f"table.exec.state.ttl must be >= 0 ms (0 = off), got {self.ttl_ms}")

    @property
    def enabled(self) -> bool:
        """True when state expires."""
        return self.ttl_ms > 0

    def visible(self, stamp: int, now: int) -> bool:
        """The visibility rule: ``now < stamp + ttl_ms`` (always True when TTL is off)."""
        return self.ttl_ms <= 0 or now < stamp + self.ttl_ms

    def stamp_of(self, ts: int | None, now: int) -> int:
        """The stamp of a write caused by a change carrying ``ts`` at clock ``now``.

        Processing time: ``now``. Event time: ``ts``; MissingTimestampError when TTL is on and
        ``ts`` is None (with TTL off the stamp is never read, so ``now`` stands in).
        """
        if self.time_domain is TimeDomain.PROCESSING_TIME:
            return now
        if ts is None:
            if self.enabled:
                raise MissingTimestampError(
                    "event-time TTL needs a timestamp on every change "
                    '(the JSON Lines field "ts", integer milliseconds); this change has none'
                )
            return now
        return ts
