"""``upsertmat replay`` as a real process: the console script's exit codes and streams, a locked
state directory, signals and kills between and during runs, outputs that cannot be written,
a reader that goes away."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from upsertmat import __version__
from upsertmat.errors import ExitCode
from upsertmat.impls.build import build_name
from upsertmat.impls.persistence import MANIFEST_NAME

from ..conftest import Cli
from ..prerequisites import requires
from .support import (
    EXAMPLE,
    GOOD,
    ROOT,
    SCRIPT,
    lines,
    script,
)


def test_console_script_exit_codes_and_streams(tmp_path: Path) -> None:
    ok = script("replay", "--pk", "0", "--strategy", "legacy", "--backend", "heap", "-q", EXAMPLE)
    assert (ok.returncode, ok.stderr) == (0, "")
    assert ok.stdout == (ROOT / "examples" / "out-of-order.expected.jsonl").read_text(encoding="utf-8")
    bad = script("replay", "--pk", "0", "-", stdin=lines(GOOD[0]) + '{"op": "+X", "row": [1, 2]}\n')
    assert bad.returncode == 1
    assert bad.stdout == '{"in": 0, "op": "+I", "row": [1, "a"]}\n'
    assert bad.stderr.startswith(
        "upsertmat replay: line 2: unknown op '+X' (expected one of +I, -U, +U, -D)\n"
    )
    usage = script("replay", "--pk", "0", "--set", "bogus=1", stdin="")
    assert usage.returncode == 2
    assert usage.stderr.startswith("upsertmat replay: unknown configuration key 'bogus'")
    assert script("--version").stdout == f"upsertmat {__version__} ({build_name()})\n"
    module = subprocess.run([sys.executable, "-m", "upsertmat", "--version"], capture_output=True, text=True)
    assert module.stdout == f"upsertmat {__version__} ({build_name()})\n"


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A replay process holding ``tmp_path/st``, blocked reading its stdin after one line."""
    process = subprocess.Popen(
        [SCRIPT, "replay", "--pk", "0", "--state-dir", str(tmp_path / "st"), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines(GOOD[0]))
    process.stdin.flush()
    assert process.stdout.readline() == '{"in": 0, "op": "+I", "row": [1, "a"]}\n'  # flushed per input
    yield process
    if process.poll() is None:
        process.kill()
    process.wait()


def test_a_second_process_on_a_locked_state_dir_fails_at_once(
    tmp_path: Path, holder: subprocess.Popen[str]
) -> None:
    started = time.monotonic()
    second = script("replay", "--pk", "0", "--state-dir", tmp_path / "st", stdin=lines(GOOD[1]))
    assert time.monotonic() - started < 30
    assert second.returncode == ExitCode.STATE_DIR
    assert f"state directory {tmp_path / 'st'} is in use by another upsertmat process" in second.stderr
    assert holder.stdin is not None
    holder.stdin.write(lines(GOOD[1]))
    holder.stdin.close()
    assert holder.wait(timeout=60) == 0
    after = script(
        "replay", "--pk", "0", "--state-dir", tmp_path / "st", "--stream-line", "2", stdin=lines(GOOD[2])
    )
    assert (after.returncode, after.stdout) == (0, '{"in": 2, "op": "-D", "row": [1, "a"]}\n')


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_waiting_for_input_saves_the_state(
    tmp_path: Path, holder: subprocess.Popen[str], signum: int, code: int
) -> None:
    holder.send_signal(signum)
    assert holder.wait(timeout=60) == code
    assert holder.stderr is not None
    assert "interrupted after 1 line(s); state saved" in holder.stderr.read()
    manifest = json.loads((tmp_path / "st" / MANIFEST_NAME).read_text())
    assert manifest["lines"] == 1
    # The interrupted run is unfinished: the same input would resume it; new input says where it starts.
    after = script(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path / "st",
        "--stream-line",
        "1",
        stdin=lines(GOOD[1], GOOD[0]),
    )
    assert after.stdout == '{"in": 1, "op": "+I", "row": [2, "b"]}\n{"in": 2, "op": "+U", "row": [1, "a"]}\n'


def test_state_dir_survives_a_kill_between_runs(tmp_path: Path) -> None:
    """SIGKILL mid-run leaves the previous run's state; re-running the killed run's input is exact."""
    first = script("replay", "--pk", "0", "--state-dir", tmp_path / "st", stdin=lines(GOOD[0]))
    assert first.returncode == 0
    process = subprocess.Popen(
        [SCRIPT, "replay", "--pk", "0", "--state-dir", str(tmp_path / "st"), "--stream-line", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines(GOOD[1]))
    process.stdin.flush()
    assert process.stdout.readline() == '{"in": 1, "op": "+I", "row": [2, "b"]}\n'
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    again = script(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path / "st",
        "--stream-line",
        "1",
        stdin=lines(GOOD[1], GOOD[2]),
    )
    assert again.stdout == '{"in": 1, "op": "+I", "row": [2, "b"]}\n{"in": 2, "op": "-D", "row": [1, "a"]}\n'


@requires(Path("/dev/full").exists(), "/dev/full (a device that is always full)")
def test_an_output_that_cannot_be_written_exits_4_and_leaves_the_state_as_before(
    cli: Cli, tmp_path: Path
) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[0])).code == 0
    before = (tmp_path / MANIFEST_NAME).read_text()
    result = cli(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path,
        "--stream-line",
        "1",
        "-o",
        "/dev/full",
        stdin=lines(GOOD[1]),
    )
    assert result.code == ExitCode.IO
    assert "cannot write output /dev/full: No space left on device" in result.err
    after = json.loads((tmp_path / MANIFEST_NAME).read_text())
    kept = ("lines", "snapshot", "snapshot_sha256", "now", "retract_misses")
    assert {k: after[k] for k in kept} == {k: json.loads(before)[k] for k in kept}
    assert after["in_progress"]  # the next run resumes this one (docs/operations.md)
    again = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[1]))
    assert again.out == '{"in": 1, "op": "+I", "row": [2, "b"]}\n'


def test_an_unwritable_dead_letter_file_exits_4(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "dead.jsonl").mkdir()  # its directory exists, but the file cannot be opened
    result = cli(
        "replay",
        "--pk",
        "0",
        "--on-error",
        "skip",
        "--dead-letter",
        tmp_path / "dead.jsonl",
        stdin="oops\n",
    )
    assert result.code == ExitCode.IO
    assert f"cannot write dead-letter file {tmp_path / 'dead.jsonl'}" in result.err


def test_a_reader_that_goes_away_ends_the_run_quietly(tmp_path: Path) -> None:
    """`replay ... | head -1`: exit 128 + SIGPIPE with nothing on stderr, like Unix tools."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(f'{{"op": "+I", "row": [{i}, "{"x" * 200}"]}}\n' for i in range(5000)))
    process = subprocess.Popen(
        [SCRIPT, "replay", "--pk", "0", str(source)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert process.stdout is not None and process.stderr is not None
    assert process.stdout.readline().startswith(b'{"in": 0')
    process.stdout.close()
    assert process.wait(timeout=60) == 128 + signal.SIGPIPE
    assert process.stderr.read() == b""
    process.stderr.close()
