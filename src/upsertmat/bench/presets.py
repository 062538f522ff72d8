"""The ``bench`` presets: the values of the options a user did not give (the full grid, and
``--quick``'s smoke run), and the backends benchmarked by default."""

from __future__ import annotations

from dataclasses import dataclass

from ..impls import Backend
from .runner import FLIP544, MANY_KEYS

DEFAULT_BACKENDS = (Backend.HEAP, Backend.ROCKSDB, Backend.LMDB)


@dataclass(frozen=True)
class Preset:
    """Values of the options a user did not give."""

    records: int
    retract_delays: tuple[int, ...]
    retract_percentages: tuple[int, ...]
    repetitions: int
    max_seconds_per_cell: float
    workloads: tuple[str, ...] = (FLIP544,)
    many_keys_changes: int = 1_000_000
    many_keys_keys: int = 100_000


FULL = Preset(
    records=10_000,
    retract_delays=(2, 10, 100, 1000, 5000),
    retract_percentages=(100, 75),
    repetitions=5,
    max_seconds_per_cell=30.0,
    workloads=(FLIP544, MANY_KEYS),
)
QUICK = Preset(
    records=300,
    retract_delays=(2, 10, 100),
    retract_percentages=(100, 75),
    repetitions=1,
    max_seconds_per_cell=5.0,
    workloads=(FLIP544,),
    many_keys_changes=20_000,
    many_keys_keys=2_000,
)
