"""Ctrl-C and SIGTERM at the moments of start-up: one line, exit 130 / 143, no process left.

Each case starts ``python -m upsertmat COMMAND`` (the console script's path) as a subprocess,
waits for a moment of its start-up that can be seen from outside (never a fixed sleep: the
machine may be loaded), sends the signal, and checks that the exit code is 128 + its number,
that what the command writes to stderr after the signal is one line (the ``interrupted`` one;
no traceback), and that every process it started (the JVM, Python workers) is gone afterwards.

The moments:

- ``handler``: the command line's handler is installed (SIGTERM caught, ``/proc/PID/status``)
  while the commands are still being imported;
- ``line``: ``starting Spark ...`` is on stderr (PySpark is being imported);
- ``jvm``: a ``java`` process exists below the command (the JVM is being launched);
- ``context``: Spark's log says log4j is set up: the JVM's gateway answers and the SparkContext
  is being created (where pyspark's own SIGINT handler used to raise inside py4j calls);
- ``query``: the query wrote its checkpoint's ``metadata``: it stops at a micro-batch boundary
  (a notice that it waits for one may come first, if the stop takes more than a second).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from .sockets import descendants

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = """\
name: interrupted
source:
  path: source
  columns: [{id: long}, {level: long}]
keys: {primary-key: [id]}
sink: {url: out.db, table: users}
checkpoint: checkpoint
"""
DEADLINE_SECONDS = 300.0  # a bound on waiting for what must happen, never an assertion on speed
SIGTERM_CAUGHT = 1 << (signal.SIGTERM - 1)


class Processes:
    """Every process ever seen below ``root`` (pid -> start time), followed after ``root`` exits."""

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: dict[int, str] = {}

    def poll(self) -> None:
        for pid in (self.root, *self.alive()):
            for found in descendants(pid)[1:]:
                start = _start_time(found)
                if start is not None:
                    self.seen.setdefault(found, start)

    def alive(self) -> list[int]:
        return [pid for pid, start in self.seen.items() if _start_time(pid) == start]

    def commands(self) -> list[str]:
        return [_command(pid) for pid in self.alive()]


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time (tells a live process from a reused pid); None if gone or a zombie."""
    fields = _stat(pid)
    return None if fields is None or fields[0] == "Z" else fields[19]


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def handler_installed(process: subprocess.Popen[bytes]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            status = Path(f"/proc/{process.pid}/status").read_text()
        except OSError:
            return False
        caught = next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:"))
        return bool(int(caught, 16) & SIGTERM_CAUGHT)

    return check


def on_stderr(path: Path, text: str) -> Callable[[], bool]:
    return lambda: text in path.read_text(errors="replace")


def jvm_running(processes: Processes) -> Callable[[], bool]:
    return lambda: any(command.split(" ", 1)[0].endswith("java") for command in processes.commands())


def in_log(directory: Path, text: str) -> Callable[[], bool]:
    """``text`` is in a ``*.log`` file under ``directory`` (Spark's log)."""
    return lambda: any(text in path.read_text(errors="replace") for path in directory.rglob("*.log"))


def interrupt(
    command: Sequence[str],
    directory: Path,
    moment: Callable[[subprocess.Popen[bytes], Processes, Path], Callable[[], bool]],
    number: signal.Signals,
) -> tuple[list[str], list[str]]:
    """Run ``upsertmat COMMAND`` in ``directory``, send ``number`` at ``moment``; (stderr lines
    before the signal, after it). Asserts the exit code and that no process is left."""
    err = directory / "stderr.txt"
    environment = {**os.environ, "UPSERTMAT_SPARK_LOG": str(directory / "spark.log")}
    with err.open("wb") as stream:
        process = subprocess.Popen(
            [sys.executable, "-m", "upsertmat", *command],
            cwd=directory,
            stdout=subprocess.DEVNULL,
            stderr=stream,
            env=environment,
        )
    processes = Processes(process.pid)
    try:
        reached = moment(process, processes, err)
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not reached():
            assert process.poll() is None, f"exited with {process.returncode} first: {err.read_text()}"
            assert time.monotonic() < deadline, f"the moment never came: {err.read_text()}"
            processes.poll()
            time.sleep(0.02)
        processes.poll()
        before = err.read_text(errors="replace")
        process.send_signal(number)
        while process.poll() is None:
            assert time.monotonic() < deadline + DEADLINE_SECONDS, "no exit after the signal"
            processes.poll()
            time.sleep(0.02)
        while processes.alive():  # the JVM ends when its stdin (the command's pipe) closes
            assert time.monotonic() < deadline + 2 * DEADLINE_SECONDS, processes.commands()
            processes.poll()
            time.sleep(0.1)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in processes.alive():
            os.kill(pid, signal.SIGKILL)
    text = err.read_text(errors="replace")
    assert process.returncode == 128 + number, text
    assert "Traceback" not in text, text
    return before.splitlines(), text[len(before) :].splitlines()


def write_job(directory: Path) -> None:
    (directory / "job.yaml").write_text(JOB)
    source = directory / "source"
    source.mkdir()
    rows = [{"seq": seq, "op": "+I", "id": seq % 7, "level": seq} for seq in range(50)]
    (source / "part-0.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def at_handler(process: subprocess.Popen[bytes], processes: Processes, err: Path) -> Callable[[], bool]:
    return handler_installed(process)


def at_line(process: subprocess.Popen[bytes], processes: Processes, err: Path) -> Callable[[], bool]:
    return on_stderr(err, "starting Spark")


def at_jvm(process: subprocess.Popen[bytes], processes: Processes, err: Path) -> Callable[[], bool]:
    return jvm_running(processes)


def at_context(process: subprocess.Popen[bytes], processes: Processes, err: Path) -> Callable[[], bool]:
    return in_log(err.parent, "Setting default log level")


@pytest.mark.parametrize(
    ("moment", "number"),
    [
        (at_handler, signal.SIGTERM),
        (at_line, signal.SIGINT),
        (at_jvm, signal.SIGTERM),
        (at_context, signal.SIGINT),
    ],
    ids=["handler-SIGTERM", "line-SIGINT", "jvm-SIGTERM", "context-SIGINT"],
)
def test_run_interrupted_while_starting(
    tmp_path: Path, moment: Callable[..., Callable[[], bool]], number: signal.Signals
) -> None:
    write_job(tmp_path)
    before, after = interrupt(["run", "job.yaml"], tmp_path, moment, number)
    assert set(before) <= {"upsertmat run: starting Spark (local[2]) ..."}, before
    assert len(after) == 1, after
    assert re.fullmatch(
        rf"upsertmat( run)?: interrupted \({number.name}\)( while Spark was starting.*)?", after[0]
    )
    assert not (tmp_path / "out.db").exists()


def at_query(process: subprocess.Popen[bytes], processes: Processes, err: Path) -> Callable[[], bool]:
    return lambda: (err.parent / "checkpoint" / "metadata").exists()


def test_run_interrupted_once_the_query_runs_stops_at_a_batch_boundary(tmp_path: Path) -> None:
    write_job(tmp_path)
    _, after = interrupt(["run", "job.yaml", "--quiet"], tmp_path, at_query, signal.SIGTERM)
    *waiting, last = after
    notice = "upsertmat run: stopping at the next micro-batch boundary (press Ctrl-C again to exit at once)"
    assert set(waiting) <= {notice}, after
    assert re.fullmatch(
        r"upsertmat run: interrupted \(SIGTERM\) after (1 micro-batch|\d+ micro-batches) \([\d,]+ changes\); "
        r"every committed batch is kept: run the same command again to continue; Spark's log: .*spark\.log",
        last,
    ), last


def test_demo_interrupted_while_the_context_starts(tmp_path: Path) -> None:
    before, after = interrupt(
        ["demo", "--users", "20", "--events", "100"], tmp_path, at_context, signal.SIGINT
    )
    assert before == ["upsertmat demo: starting Spark (local[2]; about 15 s) ..."]
    assert after == [f"upsertmat demo: interrupted (SIGINT); Spark's log: {tmp_path / 'spark.log'}"]


def test_execute_plan_interrupted_while_the_jvm_starts(tmp_path: Path) -> None:
    write_job(tmp_path)
    compiled = subprocess.run(
        [sys.executable, "-m", "upsertmat", "compile-plan", "job.yaml", "-o", "plan.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
    )
    assert compiled.returncode == 0, compiled.stderr
    before, after = interrupt(["execute-plan", "plan.json"], tmp_path, at_jvm, signal.SIGINT)
    assert before == ["upsertmat execute-plan: starting Spark (local[2]) ..."]
    assert after == [
        "upsertmat execute-plan: interrupted (SIGINT) while Spark was starting: this run wrote nothing; "
        f"Spark's log: {tmp_path / 'spark.log'}"
    ]


@pytest.mark.parametrize(
    ("moment", "number"),
    [(at_jvm, signal.SIGTERM), (at_context, signal.SIGINT)],
    ids=["jvm-SIGTERM", "context-SIGINT"],
)
def test_gateway_interrupted_while_starting(
    tmp_path: Path, moment: Callable[..., Callable[[], bool]], number: signal.Signals
) -> None:
    root = tmp_path / "root"
    before, after = interrupt(["gateway", "--data-root", str(root), "--port", "0"], tmp_path, moment, number)
    assert before == ["upsertmat gateway: starting Spark (local[2]) ..."]
    assert after == [f"upsertmat gateway: interrupted ({number.name})"]
    assert not (root / "gateway.json").exists()
