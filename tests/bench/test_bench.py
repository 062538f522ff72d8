"""``upsertmat bench``: the workload generator, the runner's budget, the goal arithmetic and a
tiny end-to-end run through the command on LEGACY/heap. No timing assertions."""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

from upsertmat import cli
from upsertmat.bench import runner
from upsertmat.bench.goals import (
    EXACT,
    INCONCLUSIVE,
    LOWER,
    MISS,
    NOT_RUN,
    PASS,
    UPPER,
    Measure,
    check_goals,
    decide,
)
from upsertmat.bench.presets import QUICK
from upsertmat.bench.progress import format_duration
from upsertmat.bench.report import CSV_COLUMNS
from upsertmat.bench.runner import CHUNK, PARTIAL, SKIPPED, Cell, CellResult, Plan, run_cell
from upsertmat.bench.stats import summarize
from upsertmat.bench.workload import HistoryShape, WorkloadSpec, generate, keys_for
from upsertmat.cli import main
from upsertmat.commands import bench as command
from upsertmat.impls import Backend, Strategy
from upsertmat.impls import create as create_materializer
from upsertmat.impls.build import build_name
from upsertmat.spec import ModelMaterializer, RowKind

# --- workload -------------------------------------------------------------------------------


def live_lengths(spec: WorkloadSpec) -> tuple[list[int], set[int]]:
    """Replay the workload's ids: history length after each change, and the ids still live."""
    workload = generate(spec)
    live: set[int] = set()
    lengths = []
    for change in [*workload.prefix, *workload.timed]:
        row_id = change.row[1]
        assert isinstance(row_id, int)
        if change.kind.is_add:
            assert row_id not in live
            live.add(row_id)
        else:
            assert row_id in live, "a retraction of a row that is not live"
            live.remove(row_id)
        lengths.append(len(live))
    return lengths, live


@pytest.mark.parametrize("delay", [0, 1, 7, 50])
@pytest.mark.parametrize("warmup", [True, False])
def test_exact_counts(delay: int, warmup: bool) -> None:
    spec = WorkloadSpec(
        records=333, retract_delay=delay, retract_percentage=100, payload_size=5, warmup=warmup
    )
    workload = generate(spec)
    assert len(workload.timed) == 333
    assert len(workload.prefix) == (delay if warmup else 0)
    assert all(change.kind.is_add for change in workload.prefix)
    assert workload.adds + workload.retracts == 333


def test_kinds_and_rows() -> None:
    workload = generate(WorkloadSpec(records=40, retract_delay=3, retract_percentage=100, payload_size=4))
    changes = [*workload.prefix, *workload.timed]
    assert changes[0].kind is RowKind.INSERT
    assert {change.kind for change in changes[1:]} == {RowKind.UPDATE_AFTER, RowKind.UPDATE_BEFORE}
    assert {change.row[0] for change in changes} == {0}  # one sink key
    adds = [change for change in changes if change.kind.is_add]
    assert [change.row[1] for change in adds] == list(range(len(adds)))
    # at 100% step i is "add row i, retract row i - delay": the retraction repeats the added row
    for position, change in enumerate(changes):
        if not change.kind.is_add:
            added = changes[position - 1]
            assert added.kind.is_add
            added_id = added.row[1]
            assert isinstance(added_id, int)
            assert change.row == adds[added_id - 3].row


def test_history_stays_at_delay_at_100_percent() -> None:
    spec = WorkloadSpec(records=2000, retract_delay=100, retract_percentage=100, payload_size=1)
    lengths, _ = live_lengths(spec)
    steady = lengths[100:]
    assert min(steady) == 100 and max(steady) == 101
    history = generate(spec).history
    assert (history.start, history.max) == (100, 101)
    assert history.end in (100, 101)
    assert 100 <= history.mean <= 101


def test_history_grows_at_75_percent() -> None:
    spec = WorkloadSpec(records=4000, retract_delay=100, retract_percentage=75, payload_size=1)
    workload = generate(spec)
    lengths, live = live_lengths(spec)
    assert workload.history.start == 100
    assert workload.history.end == len(live) == lengths[-1]
    total_adds = len(workload.prefix) + workload.adds
    assert workload.history.end == total_adds - workload.retracts
    # a quarter of the steps past the delay keep their row: the history grows past the delay
    eligible = total_adds - 100
    assert 0.7 < workload.retracts / eligible < 0.8
    assert workload.history.end > 100 + 0.2 * eligible
    assert workload.history.max == max(lengths[99:])


def test_model_sees_no_retraction_misses() -> None:
    for upsert_key in (True, False):
        spec = WorkloadSpec(records=600, retract_delay=20, retract_percentage=75, payload_size=8)
        workload = generate(spec)
        model = ModelMaterializer(keys_for(upsert_key))
        for change in [*workload.prefix, *workload.timed]:
            model.process(change)
        assert model.retract_misses == 0


def test_determinism_by_seed() -> None:
    spec = WorkloadSpec(records=500, retract_delay=10, retract_percentage=75, payload_size=16, seed=7)
    first, again = generate(spec), generate(spec)
    assert first.prefix == again.prefix and first.timed == again.timed
    other = generate(
        WorkloadSpec(records=500, retract_delay=10, retract_percentage=75, payload_size=16, seed=8)
    )
    assert [c.row for c in other.timed] != [c.row for c in first.timed]
    assert [c.kind for c in other.timed] != [c.kind for c in first.timed]


def test_retraction_pattern_does_not_depend_on_payload_size() -> None:
    small = generate(WorkloadSpec(records=300, retract_delay=5, retract_percentage=75, payload_size=1))
    large = generate(WorkloadSpec(records=300, retract_delay=5, retract_percentage=75, payload_size=100))
    assert [(c.kind, c.row[1]) for c in small.timed] == [(c.kind, c.row[1]) for c in large.timed]


@pytest.mark.parametrize("size", [0, 1, 250, 1000])
def test_payload_size(size: int) -> None:
    workload = generate(WorkloadSpec(records=50, retract_delay=2, payload_size=size))
    for change in [*workload.prefix, *workload.timed]:
        payload = change.row[2]
        assert isinstance(payload, str)
        assert len(payload.encode("utf-8")) == size


def test_keys() -> None:
    assert keys_for(True).upsert_key == (1,)
    assert keys_for(False).upsert_key == ()
    assert keys_for(True).pk == keys_for(False).pk == (0,)


@pytest.mark.parametrize(
    "bad",
    [
        {"records": 0},
        {"retract_delay": -1},
        {"retract_percentage": 101},
        {"payload_size": -1},
    ],
)
def test_spec_validation(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        WorkloadSpec(**bad)  # type: ignore[arg-type]


# --- statistics and runner -------------------------------------------------------------------


def test_summarize() -> None:
    summary = summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (summary.median, summary.minimum, summary.maximum) == (3.0, 1.0, 5.0)
    assert (summary.q1, summary.q3) == (2.0, 4.0)
    assert summary.iqr == 2.0
    one = summarize([7.0])
    assert (one.q1, one.median, one.q3, one.relative_spread) == (7.0, 7.0, 7.0, 0.0)
    with pytest.raises(ValueError):
        summarize([])


def tiny_plan(**overrides: object) -> Plan:
    values: dict[str, object] = {
        "pairs": [(Strategy.LEGACY, Backend.HEAP)],
        "upsert_keys": [True],
        "retract_delays": [5],
        "retract_percentages": [100],
        "records": 200,
        "payload_size": 10,
        "repetitions": 3,
        "max_seconds_per_cell": 60.0,
    }
    values.update(overrides)
    return Plan(**values)  # type: ignore[arg-type]


def test_run_cell_repetitions() -> None:
    plan = tiny_plan()
    cell = plan.cells()[0]
    result = run_cell(plan, cell, generate(plan.workload_spec(cell)))
    assert result.status == "ok", result.note
    assert len(result.wall_throughputs) == len(result.cpu_throughputs) == 3
    assert result.throughputs is result.wall_throughputs
    assert all(value > 0 for value in result.throughputs)
    assert result.records == 200 and result.history.start == 5


def test_cpu_clock_selects_the_cpu_sample() -> None:
    plan = tiny_plan(clock="cpu", repetitions=2)
    cell = plan.cells()[0]
    result = run_cell(plan, cell, generate(plan.workload_spec(cell)))
    assert result.throughputs is result.cpu_throughputs and len(result.cpu_throughputs) == 2
    assert result.estimate == result.median_on("cpu")
    budget = tiny_plan(clock="cpu", records=CHUNK * 4, warmup=False, max_seconds_per_cell=1e-9)
    partial = run_cell(budget, cell, generate(budget.workload_spec(cell)))
    assert partial.partial_throughput == partial.partial_cpu is not None


def test_budget_during_warmup_skips_the_cell() -> None:
    plan = tiny_plan(retract_delays=[CHUNK * 3], max_seconds_per_cell=1e-9)
    cell = plan.cells()[0]
    result = run_cell(plan, cell, generate(plan.workload_spec(cell)))
    assert result.status == SKIPPED and result.estimate is None
    assert "warm-up" in result.note


def test_budget_while_timed_gives_a_partial_rate() -> None:
    plan = tiny_plan(records=CHUNK * 4, warmup=False, max_seconds_per_cell=1e-9)
    cell = plan.cells()[0]
    result = run_cell(plan, cell, generate(plan.workload_spec(cell)))
    assert result.status == PARTIAL
    assert result.partial_records == CHUNK
    assert result.throughputs == [] and result.estimate == result.partial_throughput
    assert result.partial_throughput is not None and result.partial_throughput > 0


def test_plan_cells_order() -> None:
    plan = tiny_plan(
        pairs=[(Strategy.MAP, Backend.HEAP), (Strategy.LEGACY, Backend.HEAP)],
        upsert_keys=[True, False],
        retract_delays=[2, 10],
        retract_percentages=[100, 75],
    )
    cells = plan.cells()
    assert len(cells) == 16
    assert cells[0] == Cell(Strategy.LEGACY, Backend.HEAP, True, 2, 100)
    assert cells[-1] == Cell(Strategy.MAP, Backend.HEAP, False, 10, 75)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0.4, 59, 75.3, 3725)] == ["0s", "59s", "1m15s", "1h02m"]


# --- goal arithmetic ----------------------------------------------------------------------


def synthetic(
    strategy: Strategy,
    backend: Backend,
    delay: int,
    median: float,
    *,
    pct: int = 100,
    upsert_key: bool = True,
    partial: bool = False,
) -> CellResult:
    cell = Cell(strategy, backend, upsert_key, delay, pct)
    result = CellResult(
        cell=cell, records=10, history=HistoryShape(delay, delay, delay, delay), repetitions_requested=3
    )
    if partial:
        result.status, result.partial_wall, result.partial_records = PARTIAL, median, 5
    else:
        result.wall_throughputs = [median * 0.9, median, median * 1.2]
    return result


def by_goal(results: list[CellResult], goal: str) -> list[tuple[str, float | None, str, str]]:
    return [
        (
            check.subject,
            None if check.measured is None else round(check.measured, 6),
            check.bound,
            check.status,
        )
        for check in check_goals(results)
        if check.goal == goal
    ]


def test_measure_bounds() -> None:
    assert (Measure(10) / Measure(2)) == Measure(5, EXACT)
    assert (Measure(10, UPPER) / Measure(2)).bound == UPPER
    assert (Measure(10) / Measure(2, UPPER)).bound == LOWER
    assert (Measure(10, UPPER) / Measure(2, LOWER)).bound == UPPER
    assert (Measure(10, UPPER) / Measure(2, UPPER)).bound == "unknown"
    assert decide(Measure(1.0), 0.7) == PASS and decide(Measure(0.5), 0.7) == MISS
    assert decide(Measure(1.0, LOWER), 0.7) == PASS and decide(Measure(0.5, LOWER), 0.7) == INCONCLUSIVE
    assert decide(Measure(0.5, UPPER), 0.7) == MISS and decide(Measure(1.0, UPPER), 0.7) == INCONCLUSIVE


def test_flat_goal() -> None:
    results = [
        synthetic(Strategy.MAP, Backend.ROCKSDB, 10, 40.0),
        synthetic(Strategy.MAP, Backend.ROCKSDB, 5000, 30.0),
        synthetic(Strategy.SORTED, Backend.ROCKSDB, 10, 40.0),
        synthetic(Strategy.SORTED, Backend.ROCKSDB, 5000, 20.0),
        synthetic(Strategy.LEGACY, Backend.ROCKSDB, 10, 40.0),
        synthetic(Strategy.LEGACY, Backend.ROCKSDB, 5000, 1.0),
    ]
    assert by_goal(results, "flat") == [
        ("MAP/rocksdb ukey=on pct=100", 0.75, EXACT, PASS),
        ("SORTED/rocksdb ukey=on pct=100", 0.5, EXACT, MISS),
    ]
    margins = [c.margin for c in check_goals(results) if c.goal == "flat"]
    assert margins == [pytest.approx(0.75 / 0.7 - 1), pytest.approx(0.5 / 0.7 - 1)]


def test_absolute_goal() -> None:
    results = [
        synthetic(Strategy.MAP, Backend.ROCKSDB, 1000, 31.0),
        synthetic(Strategy.MAP, Backend.ROCKSDB, 5000, 29.0),
        synthetic(Strategy.MAP, Backend.LMDB, 1000, 50.0),
    ]
    assert by_goal(results, "absolute") == [
        ("MAP/rocksdb ukey=on pct=100 delay=1000", 31.0, EXACT, PASS),
        ("MAP/rocksdb ukey=on pct=100 delay=5000", 29.0, EXACT, MISS),
        ("MAP/lmdb ukey=on pct=100 delay=1000", 50.0, EXACT, PASS),
    ]


def test_vs_legacy_goal_with_a_partial_legacy_cell() -> None:
    fast = synthetic(Strategy.MAP, Backend.ROCKSDB, 1000, 40.0, pct=75)
    fast_100 = synthetic(Strategy.MAP, Backend.ROCKSDB, 1000, 40.0, pct=100)  # not a vs-legacy cell
    fast_off = synthetic(Strategy.MAP, Backend.ROCKSDB, 1000, 40.0, pct=75, upsert_key=False)
    # LEGACY ran out of budget: 0.5 ops/ms is an upper bound, so MAP/LEGACY >= 80 passes
    slow = synthetic(Strategy.LEGACY, Backend.ROCKSDB, 1000, 0.5, pct=75, partial=True)
    # without upsert key LEGACY finished: 40 / 1 = 40 < 50 misses
    slow_off = synthetic(Strategy.LEGACY, Backend.ROCKSDB, 1000, 1.0, pct=75, upsert_key=False)
    assert by_goal([fast, fast_100, fast_off, slow, slow_off], "vs-legacy") == [
        ("MAP vs LEGACY /rocksdb ukey=on pct=75 delay=1000", 80.0, LOWER, PASS),
        ("MAP vs LEGACY /rocksdb ukey=off pct=75 delay=1000", 40.0, EXACT, MISS),
    ]


def test_adaptive_goal() -> None:
    results = [
        synthetic(Strategy.ADAPTIVE, Backend.HEAP, 2, 95.0),
        synthetic(Strategy.VALUE, Backend.HEAP, 2, 100.0),
        synthetic(Strategy.ADAPTIVE, Backend.HEAP, 2, 80.0, upsert_key=False),
        synthetic(Strategy.VALUE, Backend.HEAP, 2, 100.0, upsert_key=False),
        # at 75% the history is not short: not a check
        synthetic(Strategy.ADAPTIVE, Backend.HEAP, 2, 10.0, pct=75),
        synthetic(Strategy.VALUE, Backend.HEAP, 2, 100.0, pct=75),
    ]
    assert by_goal(results, "adaptive") == [
        ("ADAPTIVE vs VALUE /heap ukey=on pct=100 delay=2", 0.95, EXACT, PASS),
        ("ADAPTIVE vs VALUE /heap ukey=off pct=100 delay=2", 0.8, EXACT, MISS),
    ]


def test_goals_not_run() -> None:
    checks = check_goals([synthetic(Strategy.LEGACY, Backend.HEAP, 2, 10.0, pct=75)])
    assert [(c.goal, c.status) for c in checks] == [
        ("flat", NOT_RUN),
        ("absolute", NOT_RUN),
        ("vs-legacy", NOT_RUN),
        ("adaptive", NOT_RUN),
        ("every-cell", NOT_RUN),
    ]


def test_every_cell_goal_floors_short_and_long_histories() -> None:
    results = [
        synthetic(Strategy.SORTED, Backend.ROCKSDB, 2, 0.64),  # the pathological cell it was made for
        synthetic(Strategy.SORTED, Backend.ROCKSDB, 1000, 70.0),
        synthetic(Strategy.LEGACY, Backend.ROCKSDB, 2, 300.0),
        synthetic(Strategy.LEGACY, Backend.ROCKSDB, 1000, 5.8),  # O(n) by design: floor 1
        synthetic(Strategy.MAP, Backend.HEAP, 1000, 20.0, partial=True),  # an upper bound below 30
        synthetic(Strategy.MAP, Backend.HEAP, 2, 900.0, pct=75),  # not a pct=100 cell
    ]
    assert by_goal(results, "every-cell") == [
        ("MAP/heap ukey=on pct=100 delay=1000", 20.0, UPPER, MISS),
        ("LEGACY/rocksdb ukey=on pct=100 delay=2", 300.0, EXACT, PASS),
        ("LEGACY/rocksdb ukey=on pct=100 delay=1000", 5.8, EXACT, PASS),
        ("SORTED/rocksdb ukey=on pct=100 delay=2", 0.64, EXACT, MISS),
        ("SORTED/rocksdb ukey=on pct=100 delay=1000", 70.0, EXACT, PASS),
    ]


# --- the command ----------------------------------------------------------------------------


def test_add_parser_registers_bench() -> None:
    parser = argparse.ArgumentParser()
    command.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(
        ["bench", "--strategy", "MAP,legacy", "--upsert-key", "off", "--retract-delay", "2,10"]
    )
    assert args.run is command.run
    plan, _ = command.build_plan(args)
    assert plan.upsert_keys == [False] and list(plan.retract_delays) == [2, 10]


def test_quick_preset_and_explicit_options() -> None:
    parser = argparse.ArgumentParser()
    command.configure(parser)
    plan, _ = command.build_plan(parser.parse_args(["--quick", "--records", "77"]))
    assert plan.records == 77
    assert plan.repetitions == QUICK.repetitions
    assert list(plan.retract_delays) == list(QUICK.retract_delays)


def test_end_to_end_legacy_heap(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "bench"
    argv = [
        "--quick",
        "--strategy",
        "LEGACY",
        "--backend",
        "heap",
        "--retract-delay",
        "2,10",
        "--output-dir",
        str(out),
    ]
    assert cli.main(["bench", *argv]) == 0  # through the top-level command line
    captured = capsys.readouterr()
    assert "LEGACY/heap" in captured.out and "goals:" in captured.out
    assert "[8/8]" in captured.err  # progress on stderr

    with (out / "results.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 8  # 2 upsert-key settings x 2 delays x 2 percentages
    assert tuple(rows[0]) == CSV_COLUMNS
    assert {row["status"] for row in rows} == {"ok"}
    assert all(float(row["median_ops_per_ms"]) > 0 for row in rows)
    assert {row["upsert_key"] for row in rows} == {"true", "false"}

    document = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert document["parameters"]["records"] == QUICK.records
    assert len(document["results"]) == 8
    assert all(len(row["wall_throughputs_ops_per_ms"]) == QUICK.repetitions for row in document["results"])
    assert all(len(row["cpu_throughputs_ops_per_ms"]) == QUICK.repetitions for row in document["results"])
    goals = {goal["goal"]: goal["status"] for goal in document["goals"]}
    assert [goals[goal] for goal in ("flat", "absolute", "vs-legacy", "adaptive")] == [NOT_RUN] * 4
    assert goals["every-cell"] in (PASS, MISS)  # LEGACY/heap at delay 2 is one of its cells
    assert document["machine"]["cores"] >= 1
    assert document["machine"]["build"] == build_name()

    image = matplotlib.image.imread(out / "throughput-heap.png")
    assert image.shape[0] > 100 and image.shape[1] > 100


def test_json_format_and_unregistered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--quick",
        "--strategy",
        "LEGACY",
        "--backend",
        "heap,spark",
        "--upsert-key",
        "on",
        "--retract-delay",
        "3",
        "--retract-percentage",
        "75",
        "--format",
        "json",
        "--quiet",
        "--output-dir",
        str(tmp_path),
    ]
    assert main(["bench", *argv]) == 0
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    assert document["unavailable"] == ["LEGACY/spark"]
    assert [(r["strategy"], r["backend"], r["retract_delay"]) for r in document["results"]] == [
        ("LEGACY", "heap", 3)
    ]
    assert "LEGACY/spark is not registered" in captured.err


def test_nothing_registered_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--backend", "spark", "--output-dir", str(tmp_path)]) == 2
    assert "nothing to benchmark" in capsys.readouterr().err


def test_markdown_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "--quick",
        "--strategy",
        "LEGACY",
        "--backend",
        "heap",
        "--upsert-key",
        "off",
        "--retract-delay",
        "2,10",
    ]
    assert (
        main(
            [
                "bench",
                *argv,
                "--retract-percentage",
                "75",
                "--format",
                "markdown",
                "--output-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "#### heap" in out and "| strategy | upsert key | retract % | delay 2 | delay 10 |" in out
    assert out.count("| LEGACY | off | 75 |") == 1
    assert "NOT RUN" not in out  # goals without cells are named on one line, not as rows
    assert "goals not checked (this run has none of their cells): flat, absolute, vs-legacy, adaptive" in out
    assert "#### memory" in out and "| LEGACY/heap ukey=off pct=75 delay=2 |" in out


# --- the commit interval of byte backends -----------------------------------------------------


@pytest.mark.parametrize(("interval", "durable"), [(1000, 1), (1, 200)])
def test_byte_backends_commit_per_interval_and_the_last_commit_is_timed(
    monkeypatch: pytest.MonkeyPatch, interval: int, durable: int
) -> None:
    """The order of events in one repetition on rocksdb: the prefix, its (untimed) commit, the
    clocks start, the timed inputs, the final commit, the clocks stop. Durable commits inside
    the timed region: only the final one at interval 1000 (200 timed inputs), one per input
    (and none left for the final commit) at interval 1. Counted, never timed."""
    events: list[str] = []
    real_create = create_materializer

    class Spy:
        def __init__(self, inner: Any) -> None:
            self.inner = inner
            self.backend = inner.backend

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def process_many(self, changes: Any, out: Any = None) -> Any:
            events.append("process")
            return self.inner.process_many(changes, out)

        def commit(self) -> None:
            self.inner.commit()
            events.append(f"commit@{self.backend.durable_commits}")

    spies: list[Spy] = []

    def create(keys: Any, settings: Any) -> Any:
        assert settings.checkpoint_interval == interval
        spies.append(Spy(real_create(keys, settings)))
        return spies[-1]

    real_clock = time.process_time_ns

    def clock() -> int:
        events.append("clock")
        return real_clock()

    monkeypatch.setattr(runner, "create", create)
    monkeypatch.setattr(time, "process_time_ns", clock)
    plan = tiny_plan(pairs=[(Strategy.MAP, Backend.ROCKSDB)], repetitions=1, checkpoint_interval=interval)
    cell = plan.cells()[0]
    result = run_cell(plan, cell, generate(plan.workload_spec(cell)))
    assert result.status == "ok", result.note
    timed = events[events.index("clock") :]
    assert timed[0] == "clock" and timed[-1] == "clock"
    assert timed[-2].startswith("commit@")  # the final commit is inside the timed region
    assert events[events.index("clock") - 1].startswith("commit@")  # the prefix's, untimed
    start = int(events[events.index("clock") - 1].split("@")[1])
    end = int(timed[-2].split("@")[1])
    assert end - start == durable
    assert spies[0].backend.durable_commits == end  # close() found nothing left to commit


def test_checkpoint_interval_option() -> None:
    parser = argparse.ArgumentParser()
    command.configure(parser)
    plan, _ = command.build_plan(parser.parse_args(["--quick"]))
    assert plan.checkpoint_interval == 1000
    plan, _ = command.build_plan(parser.parse_args(["--quick", "--checkpoint-interval", "1"]))
    assert plan.checkpoint_interval == 1
