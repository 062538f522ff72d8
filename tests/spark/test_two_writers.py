"""Two ``upsertmat run`` processes of one job file at once: one checkpoint, one sink, two JVMs.

Spark does not support two queries on one checkpoint. It stops one when a log entry it is
about to write already exists ("Concurrent update to the log. Multiple streaming jobs
detected"; for the checkpoint's ``metadata`` file, a ``FileAlreadyExistsException``), a check
that the checkpoint file manager the pipeline installs makes by looking before renaming, not
atomically (docs/spark.md, "Checkpoint files are renamed through Hadoop's FileSystem API").
This runs the case as a user meets it, twice: both processes started together on a new
checkpoint, and the second started while the first runs. Both follow the source while files
are dropped in one at a time until both have run (so that both plan the same micro-batches),
then a third run finishes on the checkpoint. What must hold whatever the interleaving: no batch
id is applied to the sink twice (its primary key), the table after the third run is the
model's, and the checkpoint stays usable. What each writer did is printed (``-s`` shows it).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from upsertmat.demo.tables import expected_table, read_sqlite_table
from upsertmat.demo.workload import DemoShape, generate

from ..gateway.process import drop_file, records

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = """\
name: twice
source:
  path: source
  columns: [{id: long}, {level: long}, {badge: string}]
keys: {primary-key: [id]}
sink: {url: out.db, table: users}
spark: {max-files-per-trigger: 1}
"""

FILES = 30
"""Source files at most, one micro-batch each: the races are per batch."""

AFTER_BOTH = 4
"""Files dropped once both writers have run (or one has stopped)."""

RUN = [sys.executable, "-m", "upsertmat", "run", "job.yaml"]


class Writer:
    """One ``upsertmat run --follow`` process; its stderr goes to a file that is read as it grows."""

    def __init__(self, directory: Path, index: int) -> None:
        self.log = directory / f"writer-{index}.err"
        self._stderr: IO[str] = self.log.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [*RUN, "--follow", "--until-idle", "15", "--trigger-interval", "200 ms"],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def err(self) -> str:
        return self.log.read_text(encoding="utf-8")

    def batches(self) -> list[int]:
        """The micro-batches this writer reported committed (its progress lines)."""
        return [
            int(line.split()[3].rstrip(":"))
            for line in self.err().splitlines()
            if line.startswith("upsertmat run batch ")
        ]

    def why(self) -> str:
        """What stopped it: the first line naming an exception, else its last line."""
        lines = [line for line in self.err().splitlines() if line.strip()]
        named = [line for line in lines if "Exception" in line or "Error" in line]
        return (named or lines or [""])[0][:300]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self._stderr.close()


def applied(database: Path) -> list[tuple[str, int]]:
    """The sink's record of applied batches: (query id, batch id), one row per application."""
    if not database.exists():
        return []
    with sqlite3.connect(database) as db:
        try:
            rows = db.execute("SELECT query_id, batch_id FROM _upsertmat_batches").fetchall()
        except sqlite3.Error:
            return []
    return [(str(query), int(batch)) for query, batch in rows]


def wait_until(predicate: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("second", ["together", "while-the-first-runs"])
def test_two_runs_of_one_job_at_once_never_apply_a_batch_twice(tmp_path: Path, second: str) -> None:
    data = generate(DemoShape(users=30, events=600, seed=11))
    arrivals = records(data.arrival)
    size = -(-len(arrivals) // FILES)
    chunks = [arrivals[i : i + size] for i in range(0, len(arrivals), size)]
    (tmp_path / "job.yaml").write_text(JOB)
    source, database = tmp_path / "source", tmp_path / "out.db"
    drop_file(source, "part-00.jsonl", chunks[0])

    writers = [Writer(tmp_path, 0)]
    try:
        if second == "while-the-first-runs":
            assert wait_until(lambda: len(applied(database)) >= 1, 300), writers[0].err()
        writers.append(Writer(tmp_path, 1))

        def both_ran() -> bool:
            return all(w.batches() or w.process.poll() is not None for w in writers)

        dropped, after = 1, 0
        deadline = time.monotonic() + 400
        while dropped < len(chunks) and after < AFTER_BOTH and time.monotonic() < deadline:
            time.sleep(1.5)
            if all(w.process.poll() is not None for w in writers):
                break
            drop_file(source, f"part-{dropped:02d}.jsonl", chunks[dropped])
            dropped += 1
            after += both_ran()
        for writer in writers:
            writer.process.wait(timeout=600)
    finally:
        for writer in writers:
            writer.stop()
    for index, writer in enumerate(writers):
        outcome = f"exit {writer.process.returncode}, batches {writer.batches()}: {writer.why()}"
        print(f"{second}: writer {index} {outcome}")
    rows = applied(database)
    print(f"{second}: {dropped} files, applied batch ids {sorted(batch for _, batch in rows)}")
    assert len(set(rows)) == len(rows)  # the sink's primary key: never twice
    assert len({query for query, _ in rows}) == 1  # one checkpoint, one query id
    ran = [bool(writer.batches()) for writer in writers]
    stopped = [writer.process.returncode != 0 for writer in writers]
    # the case was met: both ran batches, or one was stopped while the other ran
    assert all(ran) or (any(stopped) and any(ran)), [w.err()[-2000:] for w in writers]
    for writer, was_stopped in zip(writers, stopped, strict=True):
        if was_stopped:  # one line naming the other run, exit 3, no traceback
            assert writer.process.returncode == 3, writer.err()[-2000:]
            assert "another run writes the checkpoint" in writer.err() and "Traceback" not in writer.err()

    # the rest of the source, then a third run on the same checkpoint finishes the job
    for number in range(dropped, len(chunks)):
        drop_file(source, f"part-{number:02d}.jsonl", chunks[number])
    third = subprocess.run(
        RUN,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    assert third.returncode == 0, third.stderr
    assert read_sqlite_table(database, "users") == expected_table(data.logical)
    final = applied(database)
    assert len(set(final)) == len(final)
    assert sorted(batch for _, batch in final) == list(range(len(final)))  # none skipped, none twice
