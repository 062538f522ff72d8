"""Every command that writes data to stdout exits 141, quietly, when stdout's reader has gone
(`upsertmat inspect SP | head -1`), as Unix tools do; a BrokenPipeError is never reported as an
internal error (exit 70) for that."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from upsertmat.cli import main, stdout_reader_gone
from upsertmat.errors import ExitCode

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "out-of-order.jsonl"
JOB = ROOT / "examples" / "jobs" / "users-levels.yaml"
SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))


def into_closed_pipe(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``upsertmat ARGV`` with stdout a pipe whose reading end is already closed, so that
    the first write of output fails (deterministically, unlike a racing `| head`)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            [SCRIPT, *argv], stdout=write, stderr=subprocess.PIPE, text=True, cwd=cwd, timeout=120
        )
    finally:
        os.close(write)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A savepoint (`sp`) and a compiled plan (`plan.json`), made in-process (quick)."""
    directory = tmp_path_factory.mktemp("closed-pipe")
    replay = ["replay", "--pk", "0", "-q", "--state-dir", str(directory / "st"), str(EXAMPLE)]
    assert main([*replay, "-o", str(directory / "out.jsonl")]) == 0
    assert main(["savepoint", "--state-dir", str(directory / "st"), "-o", str(directory / "sp")]) == 0
    assert main(["compile-plan", str(JOB), "-o", str(directory / "plan.json")]) == 0
    return directory


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "--pk", "0", "-q", str(EXAMPLE)],
        ["inspect", "sp"],
        ["explain-plan", "plan.json"],
        ["compile-plan", str(JOB), "-o", "-"],
        [
            "bench",
            "--quiet",
            "--format",
            "json",
            "--workload",
            "flip544",
            "--strategy",
            "VALUE",
            "--backend",
            "heap",
            "--upsert-key",
            "on",
            "--retract-delay",
            "2",
            "--retract-percentage",
            "100",
            "--records",
            "50",
            "--repetitions",
            "1",
            "--output-dir",
            "bench-out",
        ],
    ],
    ids=lambda argv: argv[0],
)
def test_a_closed_stdout_exits_141_without_a_message(workdir: Path, argv: list[str]) -> None:
    result = into_closed_pipe(argv, workdir)
    assert (result.returncode, result.stderr) == (ExitCode.CLOSED_PIPE, "")


def test_help_into_a_closed_pipe_is_quiet(workdir: Path) -> None:
    result = into_closed_pipe(["replay", "--help"], workdir)
    assert result.stderr == ""  # argparse drops help it cannot write; nothing else is said


def test_a_stdout_that_is_not_a_closed_pipe_is_not_mistaken_for_one() -> None:
    # Here fd 1 is pytest's capture file or a terminal: a BrokenPipeError raised by anything
    # else than writing the output stays an internal error.
    assert not stdout_reader_gone()


def test_a_process_started_without_stdout_is_not_an_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Python sets sys.stdout to None when fd 1 is closed at start (`upsertmat ... >&-`).
    monkeypatch.setattr(sys, "stdout", None)
    assert main(["compile-plan", str(JOB), "-o", str(tmp_path / "plan.json")]) == 0
