"""``upsertmat run --follow`` as a user runs it: a subprocess, files dropped in, Ctrl-C, a rerun.

The first run (a subprocess) follows the source with ``--result-mode tableau --format jsonl`` and
is stopped by SIGINT at a micro-batch boundary (exit 130, one ``interrupted`` line, no traceback);
the rerun on the same checkpoint with ``--until-idle`` (in this process, on the shared session)
continues and stops by itself (exit 0). The changes both
runs printed, replayed, give the model's table and the sink's table: none lost, none repeated.
A stale ``JAVA_HOME`` is one line naming the cause and the log (exit 2).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.cli import main
from upsertmat.demo.tables import expected_table, read_sqlite_table
from upsertmat.demo.workload import DemoShape, generate

from ..gateway.process import drop_file, records, replay

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = """\
name: follow
source:
  path: source
  columns: [{id: long}, {level: long}, {badge: string}]
keys: {primary-key: [id]}
sink: {url: out.db, table: users}
spark: {max-files-per-trigger: 1}
"""


def start(directory: Path, *extra: str) -> subprocess.Popen[str]:
    command = [
        sys.executable,
        "-m",
        "upsertmat",
        "run",
        "job.yaml",
        "--result-mode",
        "tableau",
        "--format",
        "jsonl",
        "--trigger-interval",
        "300 ms",
        *extra,
    ]
    return subprocess.Popen(command, cwd=directory, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def committed(database: Path) -> int:
    if not database.exists():
        return -1
    import sqlite3

    with sqlite3.connect(database) as db:
        try:
            found = db.execute("SELECT max(batch_id) FROM _upsertmat_batches").fetchone()[0]
        except sqlite3.Error:
            return -1
    return -1 if found is None else int(found)


def wait_for(predicate: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError("timed out")


def test_follow_interrupt_and_rerun_continue_exactly_once(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = generate(DemoShape(users=25, events=200, seed=5))
    arrivals = records(data.arrival)
    size = -(-len(arrivals) // 4)
    chunks = [arrivals[i : i + size] for i in range(0, len(arrivals), size)]
    (tmp_path / "job.yaml").write_text(JOB)
    source, database = tmp_path / "source", tmp_path / "out.db"
    drop_file(source, "part-00.jsonl", chunks[0])

    first = start(tmp_path, "--follow")
    try:
        wait_for(lambda: committed(database) >= 0)
        drop_file(source, "part-01.jsonl", chunks[1])
        wait_for(lambda: committed(database) >= 1)
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, err
    assert "Traceback" not in err and "py4j" not in err
    assert [line for line in err.splitlines() if "interrupted (SIGINT)" in line] != []

    drop_file(source, "part-02.jsonl", chunks[2])
    drop_file(source, "part-03.jsonl", chunks[3])
    # the rerun in this process, on the shared session (as a notebook would)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    argv = [
        "run",
        "job.yaml",
        "--result-mode",
        "tableau",
        "--format",
        "jsonl",
        "--trigger-interval",
        "300 ms",
    ]
    assert main([*argv, "--until-idle", "4"]) == 0
    more = capsys.readouterr().out

    changes = [json.loads(line) for line in (out + more).splitlines()]
    positions = [change["pos"] for change in changes]
    assert positions == list(range(1, len(positions) + 1))  # none lost, none repeated
    expected = expected_table(data.logical)
    assert replay(changes) == expected == read_sqlite_table(database, "users")


def test_a_stale_java_home_is_one_line_with_the_log(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(JOB)
    drop_file(tmp_path / "source", "part-00.jsonl", [])
    environment = {
        **os.environ,
        "JAVA_HOME": "/nonexistent",
        "UPSERTMAT_SPARK_LOG": str(tmp_path / "spark.log"),
    }
    result = subprocess.run(
        [sys.executable, "-m", "upsertmat", "run", "job.yaml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )
    assert result.returncode == 2
    lines = [
        line for line in result.stderr.splitlines() if not line.endswith("starting Spark (local[2]) ...")
    ]
    assert len(lines) == 1 and "/nonexistent/bin/java" in lines[0] and str(tmp_path / "spark.log") in lines[0]


def test_tableau_into_a_closed_pipe_exits_141_quietly(tmp_path: Path) -> None:
    data = generate(DemoShape(users=10, events=40, seed=2))
    (tmp_path / "job.yaml").write_text(JOB)
    drop_file(tmp_path / "source", "part-00.jsonl", records(data.arrival))
    run = start(tmp_path, "--until-idle", "30")
    assert run.stdout is not None
    assert run.stdout.readline().startswith('{"batch": 0')
    run.stdout.close()  # as `| head -1` does
    new = [{"seq": 1000 + i, "op": "+I", "id": 1000 + i, "level": 1, "badge": "new"} for i in range(5)]
    drop_file(tmp_path / "source", "part-01.jsonl", new)  # its changes meet the closed pipe
    assert run.wait(timeout=180) == 141
    assert run.stderr is not None
    err = run.stderr.read()
    assert "Traceback" not in err and "internal error" not in err, err
