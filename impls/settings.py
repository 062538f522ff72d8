"""Typed settings of a materializer: strategy, backend, TTL and thresholds.

These are the values behind the Flink-named configuration keys (see ``config.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path


class Strategy(enum.Enum):
    """Names match Flink's ``table.exec.sink.upsert-materialize-strategy.type``."""

    LEGACY = "LEGACY"
    VALUE = "VALUE"
    MAP = "MAP"
    SORTED = "SORTED"
    ADAPTIVE = "ADAPTIVE"


class Backend(enum.Enum):
    """Where state lives (``state.backend.type``)."""

    HEAP = "heap"
    ROCKSDB = "rocksdb"
    LMDB = "lmdb"
    SPARK = "spark"


class TimeDomain(enum.Enum):
    """``upsertmat.state.ttl.time-domain``."""

    PROCESSING_TIME = "processing_time"
    EVENT_TIME = "event_time"


class UpdateType(enum.Enum):
    """``upsertmat.state.ttl.update-type``."""

    ON_CREATE_AND_WRITE = "on_create_and_write"
    ON_CREATE = "on_create"
    ON_READ_AND_WRITE = "on_read_and_write"


@dataclass(frozen=True)
class TtlSettings:
    """State retention; ``ttl_ms == 0`` means off."""

    ttl_ms: int = 0
    time_domain: TimeDomain = TimeDomain.PROCESSING_TIME
    update_type: UpdateType = UpdateType.ON_CREATE_AND_WRITE

    @property
    def enabled(self) -> bool:
        """True when state expires."""
        return self.ttl_ms > 0


@dataclass(frozen=True)
class Settings:
    """Everything that selects and tunes an implementation (but not the keys)."""

    strategy: Strategy = Strategy.LEGACY
    backend: Backend = Backend.HEAP
    ttl: TtlSettings = field(default_factory=TtlSettings)
    threshold_high: int | None = None
    threshold_low: int | None = None
    state_dir: Path | None = None
