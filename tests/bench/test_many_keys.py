"""The many-keys workload and its place in ``upsertmat bench`` (next to the FLIP-544 one)."""

from __future__ import annotations

import argparse
import csv
from collections import Counter
from pathlib import Path

import pytest

from upsertmat.bench.manykeys import ManyKeysSpec, generate_many_keys
from upsertmat.bench.presets import QUICK
from upsertmat.bench.runner import FLIP544, MANY_KEYS, Cell, Plan
from upsertmat.bench.workload import keys_for
from upsertmat.cli import main
from upsertmat.commands import bench as command
from upsertmat.errors import CliError
from upsertmat.impls import Backend, Strategy
from upsertmat.spec import ModelMaterializer, RowKind


def test_shape_and_counts() -> None:
    spec = ManyKeysSpec(changes=1_000, keys=100, payload_size=7, seed=3)
    workload = generate_many_keys(spec)
    assert len(workload.prefix) == 100 and len(workload.timed) == 900 == spec.timed
    assert [change.row[0] for change in workload.prefix] == list(range(100))
    assert all(change.kind is RowKind.INSERT for change in workload.prefix)
    kinds = Counter(change.kind for change in workload.timed)
    assert kinds[RowKind.UPDATE_BEFORE] == kinds[RowKind.UPDATE_AFTER] == 450
    assert all(len(change.row[2]) == 7 for change in workload.timed)  # type: ignore[arg-type]
    swapped = sum(1 for change in workload.timed[::2] if change.kind is RowKind.UPDATE_AFTER)
    assert 150 < swapped < 300  # about half the pairs arrive out of order
    assert workload.history.start == workload.history.end == 1 and workload.history.max == 2
    assert len({change.row[0] for change in workload.timed}) > 80  # many keys are touched


@pytest.mark.parametrize("upsert_key", [True, False])
def test_the_model_sees_no_miss_and_every_key_ends_with_its_last_version(upsert_key: bool) -> None:
    workload = generate_many_keys(ManyKeysSpec(changes=600, keys=40, payload_size=3))
    model = ModelMaterializer(keys_for(upsert_key))
    model.process_many([*workload.prefix, *workload.timed])
    assert model.retract_misses == 0
    histories = dict(model.histories())
    assert len(histories) == 40 and all(len(rows) == 1 for rows in histories.values())


def test_deterministic_and_validated() -> None:
    spec = ManyKeysSpec(changes=300, keys=30, payload_size=5, seed=9)
    assert generate_many_keys(spec).timed == generate_many_keys(spec).timed
    assert generate_many_keys(spec).timed != generate_many_keys(ManyKeysSpec(300, 30, 5, seed=10)).timed
    for bad in ({"keys": 0}, {"changes": 10, "keys": 9}, {"swap_percentage": 101}):
        with pytest.raises(ValueError):
            ManyKeysSpec(**bad)


def test_plan_puts_many_keys_cells_after_each_pairs_flip544_cells() -> None:
    plan = Plan(
        pairs=[(Strategy.MAP, Backend.HEAP)],
        upsert_keys=[True, False],
        retract_delays=[2],
        retract_percentages=[100],
        workloads=(FLIP544, MANY_KEYS),
    )
    assert [cell.workload for cell in plan.cells()] == [FLIP544, FLIP544, MANY_KEYS, MANY_KEYS]
    assert plan.cells()[2] == Cell(Strategy.MAP, Backend.HEAP, True, 0, 100, MANY_KEYS)
    assert plan.many_keys_spec() == ManyKeysSpec(payload_size=250, seed=0)


def test_quick_many_keys_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--quick", "--workload", "many-keys,flip544", "--strategy", "MAP,VALUE", "--backend", "heap"]
    argv += ["--retract-delay", "2", "--retract-percentage", "100", "--upsert-key", "on"]
    argv += ["--changes", "3000", "--keys", "500", "--output-dir", str(tmp_path), "--quiet"]
    assert main(["bench", *argv, "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert "#### many-keys" in out and "| strategy | upsert key | heap |" in out
    assert out.count("| MAP | on |") == 2  # once in the heap table, once in the many-keys table
    with (tmp_path / "results.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["strategy"], row["workload"]) for row in rows] == [
        ("VALUE", FLIP544),
        ("VALUE", MANY_KEYS),
        ("MAP", FLIP544),
        ("MAP", MANY_KEYS),
    ]
    many = [row for row in rows if row["workload"] == MANY_KEYS]
    assert all(row["status"] == "ok" and int(row["records"]) == 2500 for row in many)


def test_quick_preset_sizes_and_a_too_small_changes_count(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    command.configure(parser)
    plan, _ = command.build_plan(parser.parse_args(["--quick", "--workload", "many-keys"]))
    assert plan.many_keys == ManyKeysSpec(changes=QUICK.many_keys_changes, keys=QUICK.many_keys_keys)
    assert plan.workloads == [MANY_KEYS]
    args = parser.parse_args(["--workload", "many-keys", "--changes", "10", "--keys", "10"])
    with pytest.raises(CliError):
        command.build_plan(args)
