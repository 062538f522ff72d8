"""The many-keys workload: many sink keys, short histories, updates arriving out of order.

The shape of a real upsert pipeline (and of ``bench --pipeline``), next to FLIP-544's single
key with a long history. Definition (reproducible from the parameters alone):

* Rows are ``(key, version, payload)``: ``key`` in ``0 .. keys - 1`` is the sink key (the
  context key, column 0), ``version`` counts the key's updates (column 1: the upsert key when
  it is on, unique within a sink key), ``payload`` is ``payload_size`` ASCII characters drawn
  like the FLIP-544 workload's.
* The untimed warm-up prefix inserts every key once (``+I (key, 0, payload)``), in key order:
  afterwards every key holds one row.
* The timed part is ``changes - keys`` changes (rounded down to even), made of update pairs:
  a key drawn uniformly at random is updated from version ``v`` to ``v + 1`` as ``-U old``,
  ``+U new``; with probability ``swap_percentage / 100`` the pair arrives *out of order*
  (``+U new`` first, then ``-U old``), as when the two halves of an update travel different
  channels. So a key's history is 1 row between pairs, 0 or 2 inside one: short histories,
  every input touching a different key than the last, no retraction ever missing.
* Randomness: ``random.Random("upsertmat-bench:{seed}:many-keys:{keys}:{swap_percentage}")``
  draws the key and the coin of each pair; payloads come from the FLIP-544 payload stream of
  ``seed`` and ``payload_size``.

``keys_for(upsert_key)`` of the FLIP-544 workload applies unchanged (sink key = column 0,
upsert key = column 1). Generation is O(changes * payload_size), before any timed region.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..spec import Change, RowKind
from .workload import HistoryShape, Workload, WorkloadSpec, make_payload, payload_stream

NAME = "many-keys"


@dataclass(frozen=True)
class ManyKeysSpec:
    """The parameters of a many-keys workload (see the module docstring)."""

    changes: int = 1_000_000
    keys: int = 100_000
    payload_size: int = 250
    seed: int = 0
    swap_percentage: int = 50

    def __post_init__(self) -> None:
        if self.keys < 1:
            raise ValueError(f"keys must be >= 1, got {self.keys}")
        if self.changes < self.keys + 2:
            raise ValueError(f"changes must be >= keys + 2 ({self.keys + 2}), got {self.changes}")
        if not 0 <= self.swap_percentage <= 100:
            raise ValueError(f"swap_percentage must be within 0..100, got {self.swap_percentage}")

    @property
    def timed(self) -> int:
        """Timed changes: ``changes - keys``, rounded down to even (whole pairs)."""
        return (self.changes - self.keys) // 2 * 2


def generate_many_keys(spec: ManyKeysSpec) -> Workload:
    """Build the workload ``spec`` describes. Deterministic; O(changes * payload_size)."""
    rng = random.Random(f"upsertmat-bench:{spec.seed}:many-keys:{spec.keys}:{spec.swap_percentage}")
    payloads = payload_stream(spec.seed, spec.payload_size)
    probability = spec.swap_percentage / 100
    rows = [(key, 0, make_payload(payloads, spec.payload_size)) for key in range(spec.keys)]
    prefix = [Change(RowKind.INSERT, row) for row in rows]
    timed: list[Change] = []
    lengths: list[int] = []  # the touched key's history length before each timed change
    for _ in range(spec.timed // 2):
        key = rng.randrange(spec.keys)
        old = rows[key]
        new = (key, old[1] + 1, make_payload(payloads, spec.payload_size))
        rows[key] = new
        retract, add = Change(RowKind.UPDATE_BEFORE, old), Change(RowKind.UPDATE_AFTER, new)
        if rng.random() < probability:
            timed += (add, retract)
            lengths += (1, 2)
        else:
            timed += (retract, add)
            lengths += (1, 0)
    history = HistoryShape(start=1, end=1, mean=sum(lengths) / len(lengths), max=max(lengths))
    # The WorkloadSpec records the sizes the report shows; the generator is this module's.
    recorded = WorkloadSpec(
        records=len(timed),
        retract_delay=0,
        retract_percentage=100,
        payload_size=spec.payload_size,
        seed=spec.seed,
    )
    return Workload(spec=recorded, prefix=prefix, timed=timed, history=history)
