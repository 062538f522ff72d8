"""SORTED's seeks on RocksDB do not grow with the commit interval (counted, not timed).

With a commit interval, a RocksDB sorted map's seeks merge the pending overlay of up to N inputs
with the database. Before the ordered overlay, a reverse seek stepped past every database key
the overlay had deleted and then through RocksDB's tombstones below it, so SORTED at history 2
and interval 1000 ran at under 1 op/ms. Here each seek's overlay visits
(``RocksSortedMapState.seek_visits``: the bisection plus each overlay-touched database key
stepped over) are counted per input, on the FLIP-544 workload and on retractions of random
rows, at intervals 1, 7 and 1000; the outputs are checked against the model.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from upsertmat.bench.workload import WorkloadSpec, generate, keys_for
from upsertmat.impls import Backend, Settings, Strategy, create
from upsertmat.impls.state.rocksdb import RocksSortedMapState
from upsertmat.spec import Change, Keys, ModelMaterializer, insert, update_before

MAX_VISITS_PER_INPUT = 2  # SORTED makes at most one seek per input


def flip544(delay: int) -> list[Change]:
    workload = generate(WorkloadSpec(records=1_500, retract_delay=delay, retract_percentage=100))
    return [*workload.prefix, *workload.timed]


def random_retractions(seed: int = 7) -> list[Change]:
    """Appends to one key and retractions of random live rows (the tail among them)."""
    rng = random.Random(seed)
    live: list[tuple[int, int, str]] = []
    changes: list[Change] = []
    for step in range(1_500):
        if live and rng.random() < 0.45:
            changes.append(update_before(*live.pop(rng.randrange(len(live)))))
        else:
            row = (0, step, "x")
            live.append(row)
            changes.append(insert(*row))
    return changes


# Retractions of random rows at intervals between: a seek also steps over each database key of
# the context that the pending batch deleted above the answer (measured: up to 4 at interval 7,
# up to 17 at interval 100 on this workload); the benchmark's workload stays at 1.
CASES = [
    *((f"flip544-{delay}", interval) for delay in (2, 100) for interval in (1, 7, 100, 1000)),
    ("random", 1),
    ("random", 1000),
]


@pytest.mark.parametrize(("workload", "interval"), CASES)
def test_sorted_seeks_visit_a_bounded_number_of_overlay_entries(
    tmp_path: Path, interval: int, workload: str
) -> None:
    changes = random_retractions() if workload == "random" else flip544(int(workload.split("-")[1]))
    keys: Keys = keys_for(True)
    settings = Settings(
        strategy=Strategy.SORTED, backend=Backend.ROCKSDB, state_dir=tmp_path, checkpoint_interval=interval
    )
    materializer = create(keys, settings)
    nodes = materializer.backend.sorted_map_state("nodes")  # type: ignore[attr-defined]
    assert isinstance(nodes, RocksSortedMapState)
    model = ModelMaterializer(keys)
    most = 0
    try:
        for change in changes:
            before = nodes.seek_visits
            assert materializer.process(change) == model.process(change)
            most = max(most, nodes.seek_visits - before)
    finally:
        materializer.close()
    assert most <= MAX_VISITS_PER_INPUT
