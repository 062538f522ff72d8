"""``tools/flink_bench.py`` (Flink's side) and ``tools/flink_side_by_side.py`` (both sides).

The workload, its changelog file and the tables without Flink; one real side-by-side run of
both sides, tiny, under the ``flink`` extra (``tox -e flink``): counts and shapes, never times.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..flinkextra import require_pyflink
from ..toolscripts import load

bench = load("flink_bench")
sides = load("flink_side_by_side")
TOOLS = Path(__file__).resolve().parents[2] / "tools"


def test_every_insert_is_followed_by_the_delete_of_the_row_half_the_delay_back() -> None:
    assert bench.workload(3, 2, 100) == [
        ("+I", 0, 0),
        ("-D", -1, 0),
        ("+I", 1, 0),
        ("-D", 0, 0),
        ("+I", 2, 0),
        ("-D", 1, 0),
    ]
    events = bench.workload(200, 2000, 100, invocations=2)
    assert {key for _, _, key in events} == {0, 1} and len(events) == 800
    assert events[1] == ("-D", -1000, 0)  # a miss: the operator drops it


def test_below_100_percent_a_record_deletes_from_the_delay_on_and_by_its_position() -> None:
    events = bench.workload(300, 100, 75)
    deleting = [upsert_key + 50 for kind, upsert_key, _ in events if kind == "-D"]
    assert deleting == [i for i in range(100, 300) if i % 100 < 75]


def test_the_changelog_file_is_debezium_json_with_the_fixed_payload() -> None:
    lines = bench.changelog_lines([("+I", 7, 0), ("-D", 3, 1)], 40)
    first, second = (json.loads(line) for line in lines)
    row = {"upsertKey": 7, "streamKey": 0, "payload": bench.payload(40)}
    assert first == {"before": None, "after": row, "op": "c"}
    assert second == {"before": {**row, "upsertKey": 3, "streamKey": 1}, "after": None, "op": "d"}
    assert len(bench.payload(250).encode()) == 250


def test_a_cell_without_a_measured_repetition_has_no_median_and_no_flink_column(tmp_path: Path) -> None:
    cell = bench.Cell("LEGACY", "hashmap", True, 2, 100)
    measured = bench.Measured(cell, 1, [{"ops_per_ms": None}, {"ops_per_ms": 5.0}, {"ops_per_ms": 7.0}])
    assert measured.summary()["ops_per_ms_median"] == 6.0
    empty = bench.Measured(cell, 1, [{"ops_per_ms": None}]).summary()
    assert empty["ops_per_ms_median"] is None
    path = tmp_path / "flink.json"
    path.write_text(json.dumps({"results": [empty]}), encoding="utf-8")
    assert sides.flink_samples(path) == {("LEGACY", "heap", "on", 2): []}
    table = sides.table(sides.flink_samples(path), {("LEGACY", "heap", "on", 2): [10.0]})
    assert table.splitlines()[-1] == "| LEGACY heap, history 2 | on | - | 10 | - |"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--strategies", "SORTED"], "--strategies: expected a comma-separated list"),
        (["--upsert-key", "yes"], "--upsert-key: expected true or false"),
    ],
)
def test_the_flink_side_refuses_what_it_cannot_run_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench.main(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err.splitlines()[-1]


@pytest.mark.slow
@pytest.mark.flink
def test_one_command_runs_both_sides_and_prints_the_table(tmp_path: Path) -> None:
    require_pyflink()
    upsertmat = shutil.which("upsertmat", path=str(Path(sys.executable).parent))
    assert upsertmat is not None
    done = subprocess.run(
        [sys.executable, str(TOOLS / "flink_side_by_side.py"), "--strategies", "LEGACY",
         "--backends", "heap", "--upsert-key", "on", "--rounds", "1", "--reps", "1", "--records", "300",
         "--upsertmat", upsertmat, "--output-dir", "out"],  # relative: the Flink side runs elsewhere
        cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| LEGACY heap")]
    assert [row.split(" | ")[0] for row in rows] == [
        "| LEGACY heap, history 2",
        "| LEGACY heap, history 1,000",
    ]
    flink = json.loads((tmp_path / "out" / "round-1" / "flink.json").read_text(encoding="utf-8"))
    assert [(r["strategy"], r["backend"], r["retract_delay"]) for r in flink["results"]] == [
        ("LEGACY", "hashmap", 2),
        ("LEGACY", "hashmap", 2000),
    ]
    for result in flink["results"]:
        assert result["error"] is None  # every record reached the operator, on the backend asked for
        for run in result["runs"]:
            assert (
                run["records_in"] == 600 * run["invocations"]
                and run["state_backend"] == "HashMapStateBackend"
            )
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert set(summary) == {"flink", "upsertmat"} and "LEGACY|heap|on|1000" in summary["upsertmat"]
