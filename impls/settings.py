"""Typed settings of a materializer: strategy, backend, TTL and thresholds.

The TTL types live in ``upsertmat.spec.ttl`` (the model needs them) and are re-exported here.

These are the values behind the Flink-named configuration keys (see ``config.py``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from ..spec.conflict import ConflictBehavior
from ..spec.ttl import Granularity, TimeDomain, TtlSettings, UpdateType

__all__ = [
    "DEFAULT_CHECKPOINT_INTERVAL",
    "DEFAULT_MISS_ROWS",
    "MAX_TIME_MS",
    "Backend",
    "ConflictBehavior",
    "Granularity",
    "Settings",
    "Strategy",
    "TimeDomain",
    "TtlSettings",
    "UpdateType",
]


DEFAULT_MISS_ROWS = 20
"""Stored rows a miss explanation reads at most (``upsertmat.misses.max-rows``)."""

MAX_TIME_MS = (1 << 62) - 1
"""The largest time in milliseconds state holds: a clock, an event timestamp, a stamp, a TTL
(146 million years). A stamp plus the TTL is an expiry, and the byte backends key their TTL
timers by it as a signed 64-bit integer; keeping each below 2**62 keeps the sum below 2**63.
Inputs and settings beyond it are refused where they enter (``replay``'s lines, the TTL
setting, manifests and savepoints)."""

DEFAULT_CHECKPOINT_INTERVAL = 1000
"""Inputs per durable commit that ``replay --state-dir`` and ``bench`` use on rocksdb/lmdb
unless set (a library materializer's default is 1: docs/strategies.md, Commit interval)."""


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


class LmdbDurability(enum.Enum):
    """``upsertmat.state.lmdb.durability``: what an LMDB commit survives.

    Every mode survives a killed process (SIGKILL) with no committed input lost and no
    partial input visible. They differ on an OS crash or power loss:
    ``fast`` (writemap, no sync) may lose the last commits and may damage the file;
    ``safe`` (no writemap, no sync) may lose the last commits but keeps the file intact on
    file systems that preserve write order; ``full`` (sync per commit) loses nothing.
    """

    FAST = "fast"
    SAFE = "safe"
    FULL = "full"


@dataclass(frozen=True)
class Settings:
    """Everything that selects and tunes an implementation (but not the keys)."""

    strategy: Strategy = Strategy.LEGACY
    backend: Backend = Backend.HEAP
    ttl: TtlSettings = field(default_factory=TtlSettings)
    threshold_high: int | None = None
    threshold_low: int | None = None
    state_dir: Path | None = None
    lmdb_durability: LmdbDurability = LmdbDurability.FAST
    checkpoint_interval: int | None = None
    """``execution.checkpointing.interval``: inputs per durable commit of rocksdb/lmdb state.
    A materializer writes one batch per N inputs (and at ``commit()`` and ``close()``); None:
    every input is durable when ``process`` returns (the library default). ``replay
    --state-dir`` commits state and stream position together every N lines instead (None
    there: :data:`DEFAULT_CHECKPOINT_INTERVAL` on rocksdb/lmdb)."""
    async_state: bool = False
    """``table.exec.async-state.enabled``: ``process_many`` reads the state of a batch of
    inputs together (docs/strategies.md, Async state); output and state format unchanged."""
    expiry_budget: int = 1000
    """``upsertmat.state.ttl.expiry-budget``: at most this many due TTL timers fire per
    ``advance_time`` call and per input (0: unbounded, every due timer at once). The rest fire
    in later calls; outputs never depend on it (expired elements are invisible at once,
    docs/ttl.md), only how long physical cleanup lags behind the clock."""
    # table.exec.sink.conflict-strategy: ERROR and NOTHING select upsertmat.impls.conflict.
    conflict: ConflictBehavior = ConflictBehavior.DEDUPLICATE
    miss_rows: int = DEFAULT_MISS_ROWS
    """``upsertmat.misses.max-rows``: a retraction that matches nothing (rule 7) is explained
    from at most this many stored rows of its own key, the newest (docs/spec.md, rule 7);
    0 turns explanations off. Inputs that match read nothing more either way."""
