"""The FLIP-544 micro-benchmark workload: one sink key, a sliding window of live rows.

Definition (reproducible from the seed alone):

* Rows are ``(pk, id, payload)``: ``pk`` is always ``0`` (one sink key), ``id`` is the step
  number ``i`` (0, 1, 2, ...), ``payload`` is a string of exactly ``payload_size`` ASCII
  characters (= bytes in UTF-8) drawn from a 64-symbol alphabet.
* Step ``i`` first ADDs row ``i`` (``+I`` for ``i == 0``, ``+U`` afterwards). Then, once more
  than ``retract_delay`` rows have been added (``i >= retract_delay``), it RETRACTs (``-U``)
  the row added ``retract_delay`` adds earlier (row ``i - retract_delay``) with probability
  ``retract_percentage / 100``; a row not retracted then stays in the history forever.
  So at 100% the history length oscillates between ``retract_delay`` and
  ``retract_delay + 1``; at 75% it grows by about 0.25 rows per step beyond ``retract_delay``.
* A *record* is one change, an ADD or a RETRACT. ``records`` counts the timed records.
* With ``warmup`` (the default) the first ``retract_delay`` ADDs, which only build the
  history and can never be followed by a retraction yet, form an untimed *prefix*; the
  ``records`` timed changes that follow run at the intended history length. Without
  ``warmup`` there is no prefix: the timed part starts from empty state and includes the
  build-up (so for ``retract_delay >= records`` it never retracts at all).
* Randomness: the retraction coin flips come from ``random.Random`` seeded with
  ``"upsertmat-bench:{seed}:retract:{retract_delay}:{retract_percentage}"`` (one
  ``random()`` draw per step with ``i >= retract_delay``; retract when it is
  ``< retract_percentage / 100``); payloads from a second generator seeded with
  ``"upsertmat-bench:{seed}:payload:{payload_size}"`` (``randbytes(payload_size)`` per row,
  mapped onto the alphabet). String seeds are hashed with SHA-512 by :mod:`random`, so the
  workload is identical across processes, machines and Python versions >= 3.9.
* Upsert key on: the upsert key is the ``id`` column; off: whole-row matching. The rows and
  changes are the same either way; only :func:`keys_for` differs.

Generation is O(steps * payload_size) and happens before (outside) any timed region.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..spec import Change, Keys, RowKind

ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_TO_ALPHABET = bytes(ALPHABET[byte % len(ALPHABET)] for byte in range(256))

PK_COLUMN = 0
ID_COLUMN = 1
PAYLOAD_COLUMN = 2


@dataclass(frozen=True)
class WorkloadSpec:
    """The parameters that fully determine a workload (see the module docstring)."""

    records: int = 10_000
    retract_delay: int = 1000
    retract_percentage: int = 100
    payload_size: int = 250
    seed: int = 0
    warmup: bool = True

    def __post_init__(self) -> None:
        if self.records < 1:
            raise ValueError(f"records must be >= 1, got {self.records}")
        if self.retract_delay < 0:
            raise ValueError(f"retract_delay must be >= 0, got {self.retract_delay}")
        if not 0 <= self.retract_percentage <= 100:
            raise ValueError(f"retract_percentage must be within 0..100, got {self.retract_percentage}")
        if self.payload_size < 0:
            raise ValueError(f"payload_size must be >= 0, got {self.payload_size}")


@dataclass(frozen=True)
class HistoryShape:
    """Length of the key's history (live rows) over the timed part, computed from the workload.

    ``start``: before the first timed record; ``end``: after the last one; ``mean``: averaged
    over the states seen by the timed records (before each of them); ``max``: the largest.
    """

    start: int
    end: int
    mean: float
    max: int


@dataclass(frozen=True)
class Workload:
    """A generated workload: the untimed ``prefix`` and the ``timed`` changes, in order."""

    spec: WorkloadSpec
    prefix: list[Change]
    timed: list[Change]
    history: HistoryShape

    @property
    def adds(self) -> int:
        """Number of ADDs in the timed part."""
        return sum(1 for change in self.timed if change.kind.is_add)

    @property
    def retracts(self) -> int:
        """Number of RETRACTs in the timed part."""
        return len(self.timed) - self.adds


def keys_for(upsert_key: bool) -> Keys:
    """The operator's keys: sink PK = ``pk`` column; upsert key = ``id`` column when on."""
    return Keys(pk=(PK_COLUMN,), upsert_key=(ID_COLUMN,) if upsert_key else ())


def payload_stream(seed: int, payload_size: int) -> random.Random:
    """The generator payloads are drawn from (see the module docstring)."""
    return random.Random(f"upsertmat-bench:{seed}:payload:{payload_size}")


def make_payload(rng: random.Random, payload_size: int) -> str:
    """One ASCII payload of exactly ``payload_size`` characters (and UTF-8 bytes)."""
    return rng.randbytes(payload_size).translate(_TO_ALPHABET).decode("ascii")


def generate(spec: WorkloadSpec) -> Workload:
    """Build the workload ``spec`` describes. Deterministic: same spec, same changes.

    O(steps * payload_size) time; memory for every row of the prefix and timed part.
    """
    coin = random.Random(
        f"upsertmat-bench:{spec.seed}:retract:{spec.retract_delay}:{spec.retract_percentage}"
    )
    payloads = payload_stream(spec.seed, spec.payload_size)
    probability = spec.retract_percentage / 100
    prefix_len = spec.retract_delay if spec.warmup else 0
    total = prefix_len + spec.records

    changes: list[Change] = []
    rows: list[tuple[int, int, str]] = []
    live = 0
    live_before: list[int] = []  # history length before each change
    step = 0
    while len(changes) < total:
        row = (0, step, make_payload(payloads, spec.payload_size))
        rows.append(row)
        live_before.append(live)
        changes.append(Change(RowKind.INSERT if step == 0 else RowKind.UPDATE_AFTER, row))
        live += 1
        if step >= spec.retract_delay and len(changes) < total and coin.random() < probability:
            live_before.append(live)
            changes.append(Change(RowKind.UPDATE_BEFORE, rows[step - spec.retract_delay]))
            live -= 1
        step += 1

    timed_before = live_before[prefix_len:]
    end = live
    history = HistoryShape(
        start=timed_before[0],
        end=end,
        mean=sum(timed_before) / len(timed_before),
        max=max([*timed_before, end]),
    )
    return Workload(spec=spec, prefix=changes[:prefix_len], timed=changes[prefix_len:], history=history)
