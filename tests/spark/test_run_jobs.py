"""``upsertmat run`` and ``execute-plan`` on a real local Spark: sink tables and the TTL in force."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.cli import main
from upsertmat.demo.tables import disagreements, expected_table, read_sqlite_table
from upsertmat.demo.workload import generate

pytestmark = [pytest.mark.spark, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "users-levels.yaml"


def test_run_example_job(spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    database = tmp_path / "out.db"
    argv = [
        "run",
        str(EXAMPLE),
        "--sink",
        str(database),
        "--checkpoint",
        str(tmp_path / "ck"),
        "--strategy",
        "MAP",
    ]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "upsertmat run batch 0: 715 changes" in captured.err  # the progress line of the one batch
    assert "800 changes read" in captured.out and "materializer on, MAP" in captured.out
    table = read_sqlite_table(database, "users")
    assert disagreements(table, expected_table(generate().logical)) == []
    # a second run on the same checkpoint finds nothing new and leaves the table alone
    assert main(argv) == 0
    assert "0 changes read" in capsys.readouterr().out
    assert read_sqlite_table(database, "users") == table


JOB = """\
name: ttl
source:
  path: source
  columns: [{id: long}, {v: string}]
keys: {primary-key: [id]}
sink: {url: out.db, table: t}
spark: {max-files-per-trigger: 1}
"""


def write_ttl_job(directory: Path) -> Path:
    """Two micro-batches: insert id 1, then delete it. With a TTL shorter than the gap the delete misses."""
    (directory / "source").mkdir(parents=True)
    (directory / "source" / "a.jsonl").write_text(
        json.dumps({"seq": 0, "op": "+I", "id": 1, "v": "x"}) + "\n"
    )
    second = directory / "source" / "b.jsonl"
    second.write_text(json.dumps({"seq": 1, "op": "-D", "id": 1, "v": "x"}) + "\n")
    later = (directory / "source" / "a.jsonl").stat().st_mtime + 5  # Spark takes files in mtime order
    os.utime(second, (later, later))
    job = directory / "job.yaml"
    job.write_text(JOB)
    return job


def rows(database: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(database) as connection:
        return list(connection.execute("SELECT id, v FROM t"))


def test_plan_round_trip_edited_ttl_is_in_force(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Compile with a 1 h TTL, edit the materializer's entry to 1 ms, explain, execute.

    The TTL in force is read from what the pipeline did: with 1 h the -D of the second
    micro-batch deletes the row; with 1 ms the row expired between the batches, the -D is a
    miss (rule 7) and the sink keeps the stale row.
    """
    for name, edited_ttl, expected in (("control", None, []), ("edited", "1 ms", [(1, "x")])):
        directory = tmp_path / name
        job = write_ttl_job(directory)
        monkeypatch.chdir(directory)  # the job's outputs (out.db, the checkpoint) go to the working directory
        plan = directory / "plan.json"
        assert main(["compile-plan", str(job), "-o", str(plan), "--ttl", "1 h"]) == 0
        if edited_ttl is not None:
            document = json.loads(plan.read_text())
            document["nodes"][1]["state"][0]["ttl"] = edited_ttl
            plan.write_text(json.dumps(document))
        capsys.readouterr()
        assert main(["explain-plan", str(plan)]) == 0
        shown = "1 ms" if edited_ttl else "3600000 ms (1 h)"
        assert f"state[0] sinkMaterializeState: ttl {shown}" in capsys.readouterr().out
        assert main(["execute-plan", str(plan), "--quiet"]) == 0
        assert rows(directory / "out.db") == expected, name


def test_job_files_choose_key_buckets(tmp_path: Path) -> None:
    from upsertmat.jobs.loader import JobError, load_job
    from upsertmat.jobs.runner import pipeline_config

    text = EXAMPLE.read_text(encoding="utf-8")
    assert pipeline_config(load_job(EXAMPLE)).spark.key_buckets is None
    bucketed = tmp_path / "bucketed.yaml"
    bucketed.write_text(
        text.replace("  shuffle-partitions: 2\n", "  shuffle-partitions: 2\n  key-buckets: 16\n")
    )
    assert pipeline_config(load_job(bucketed)).spark.key_buckets == 16
    bucketed.write_text(
        text.replace("  shuffle-partitions: 2\n", "  shuffle-partitions: 2\n  key-buckets: 0\n")
    )
    with pytest.raises(JobError, match="key-buckets"):
        load_job(bucketed)
