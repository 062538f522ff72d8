"""Every way a ``replay --state-dir`` run stops, then the same command again (docs/cli.md).

For every strategy on every backend, a run stops for each reason — a bad line, an I/O error
(the output's file system full, for real on a small tmpfs; the input failing to read), a
signal (while a line is processed, and while waiting for input) — and a ``DO ERROR`` conflict
at a watermark on the byte backends. The stopped run's position must cover exactly the lines
it applied: the same command again stops at the same bad line (or conflict); once the line
is fixed in place (the disk has room, the input reads) it goes on from there, and the final
output equals, byte for byte, an uninterrupted run of the fixed input; switching to
``--on-error skip`` instead dead-letters the line exactly as an uninterrupted skipping run.
Runs are in-process (``main(argv)``); the signals are real, sent to this process at a chosen
line.
"""

from __future__ import annotations

import errno
import io
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from upsertmat.cli import main
from upsertmat.errors import ExitCode
from upsertmat.impls import available
from upsertmat.impls.persistence import MANIFEST_NAME
from upsertmat.replay import processing

from .support import UPSERT_KEY, mixed_stream

if TYPE_CHECKING:
    from ..conftest import Tmpfs

PAIRS = [pytest.param(s.value, b.value, id=f"{s.value}-{b.value}") for s, b in available()]
BAD_AT = 23  # the 0-based index of the line that stops the run
KEY = "table.exec.sink.conflict-strategy"


def stream_lines(length: int = 60, payload: int = 0) -> list[str]:
    """Changes over 5 keys with an upsert key (misses, replacements, duplicates), a clock line
    every 9 lines and a blank line, as JSON Lines."""
    lines: list[str] = []
    for step, change in enumerate(mixed_stream(7, length, UPSERT_KEY)):
        if step % 9 == 4:
            lines.append(json.dumps({"time": step}) + "\n")
        if step == 30:
            lines.append("\n")
        row = list(change.row) + (["x" * payload] if payload else [])
        lines.append(json.dumps({"op": change.kind.value, "row": row}) + "\n")
    return lines


def with_bad_line(lines: list[str]) -> list[str]:
    bad = lines.copy()
    bad[BAD_AT] = '{"op": "+X", "row": [1, 2, 3, "bad"]}\n'
    return bad


class Replay:
    """``upsertmat replay`` in this process, with fixed keys and the chosen implementation."""

    def __init__(
        self, capsys: pytest.CaptureFixture[str], strategy: str, backend: str, *extra: str, every: int = 7
    ) -> None:
        self.capsys = capsys
        self.flags = ["--pk", "0", "--upsert-key", "1", "-q", "--strategy", strategy, "--backend", backend,
                      "--checkpoint-every", str(every), *extra]  # fmt: skip
        self.err = ""

    def __call__(self, state: Path, output: Path, source: Path | str, *extra: str) -> int:
        code = main(
            ["replay", *self.flags, "--state-dir", str(state), "-o", str(output), *extra, str(source)]
        )
        self.err = self.capsys.readouterr().err
        return code


def stdin_of(monkeypatch: pytest.MonkeyPatch, raw: io.BytesIO) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(raw))


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(lines), encoding="utf-8")
    return path


def reference(tmp_path: Path, run: Replay, lines: list[str], *extra: str) -> tuple[bytes, bytes | None]:
    """Output and dead letters of one uninterrupted run over ``lines``."""
    state, output = tmp_path / "ref-state", tmp_path / "ref.jsonl"
    assert run(state, output, write(tmp_path / "ref-in.jsonl", lines), *extra) == ExitCode.OK, run.err
    dead = state / "dead-letter.jsonl"
    return output.read_bytes(), dead.read_bytes() if dead.exists() else None


def manifest(state: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((state / MANIFEST_NAME).read_text())
    return data


@pytest.mark.parametrize(("strategy", "backend"), PAIRS)
def test_a_bad_line_stops_every_rerun_until_fixed_or_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], strategy: str, backend: str
) -> None:
    run = Replay(capsys, strategy, backend)
    good = stream_lines()
    expected, _ = reference(tmp_path, run, good)
    (tmp_path / "skip").mkdir()
    skipped, skipped_dead = reference(tmp_path / "skip", run, with_bad_line(good), "--on-error", "skip")
    source, state, output = write(tmp_path / "in.jsonl", with_bad_line(good)), tmp_path / "st", tmp_path / "o"
    for attempt in range(2):  # the same command stops at the same line, every time
        assert run(state, output, source) == ExitCode.BAD_INPUT, run.err
        assert f"stopped at line {BAD_AT + 1} " in run.err and f"its next line is in={BAD_AT}" in run.err
        assert manifest(state)["lines"] == BAD_AT, attempt
        assert output.read_bytes() == b"".join(
            line for line in expected.splitlines(keepends=True) if json.loads(line)["in"] < BAD_AT
        )
    bad = write(tmp_path / "bad.jsonl", with_bad_line(good))
    assert run(tmp_path / "st-skip", tmp_path / "o-skip", bad) == ExitCode.BAD_INPUT
    write(source, good)  # the line fixed in place
    assert run(state, output, source) == ExitCode.OK, run.err
    assert f"resuming the unfinished run from stream line in={BAD_AT}" in run.err
    assert output.read_bytes() == expected
    assert run(state, output, source) == ExitCode.OK and "already applied completely" in run.err
    # From the stopped run, --on-error skip dead-letters the line as a skipping run does.
    assert run(tmp_path / "st-skip", tmp_path / "o-skip", bad, "--on-error", "skip") == ExitCode.OK, run.err
    assert (tmp_path / "o-skip").read_bytes() == skipped
    assert (tmp_path / "st-skip" / "dead-letter.jsonl").read_bytes() == skipped_dead


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_a_conflict_at_a_watermark_is_retried_not_dropped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    changes = [
        {"op": "+I", "row": [1, 10, "a"]}, {"op": "-U", "row": [1, 10, "a"]},
        {"op": "+U", "row": [1, 20, "b"]}, {"op": "+I", "row": [2, 10, "a"]}, {"time": 5},
        {"op": "+I", "row": [2, 20, "b"]}, {"op": "-D", "row": [1, 20, "b"]}, {"time": 6},
        {"op": "+I", "row": [3, 1, "x"]}, {"time": 7},
    ]  # fmt: skip
    lines = [json.dumps(line) + "\n" for line in changes]
    conflict_at = 7
    # The fix: retract one of key 2's rows before the watermark (inserted at the stop line).
    fixed = [*lines[:conflict_at], json.dumps({"op": "-D", "row": [2, 10, "a"]}) + "\n", *lines[conflict_at:]]
    run = Replay(capsys, "MAP", backend, "--set", f"{KEY}=ERROR")
    expected, _ = reference(tmp_path, run, fixed)
    (tmp_path / "skip").mkdir()
    skipped, skipped_dead = reference(tmp_path / "skip", run, lines, "--on-error", "skip")
    assert skipped_dead is not None and b"sink key [2]" in skipped_dead
    source, state, output = write(tmp_path / "in.jsonl", lines), tmp_path / "st", tmp_path / "o"
    for _ in range(2):
        assert run(state, output, source) == ExitCode.BAD_INPUT, run.err
        assert f"line {conflict_at + 1}: Primary key constraint violation" in run.err
        assert "with --on-error skip it writes the conflict to the dead-letter file" in run.err
        assert manifest(state)["lines"] == conflict_at
    conflict = write(tmp_path / "conflict.jsonl", lines)
    assert run(tmp_path / "st-skip", tmp_path / "o-skip", conflict) == ExitCode.BAD_INPUT
    assert run(state, output, write(source, fixed)) == ExitCode.OK, run.err
    assert output.read_bytes() == expected
    assert run(tmp_path / "st-skip", tmp_path / "o-skip", conflict, "--on-error", "skip") == ExitCode.OK, (
        run.err
    )
    assert (tmp_path / "o-skip").read_bytes() == skipped
    assert (tmp_path / "st-skip" / "dead-letter.jsonl").read_bytes() == skipped_dead


@pytest.mark.parametrize("small_tmpfs", ["16k"], indirect=True)
@pytest.mark.parametrize(("strategy", "backend"), PAIRS)
def test_a_full_output_disk_stops_and_the_rerun_with_room_is_exact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], small_tmpfs: Tmpfs, strategy: str, backend: str
) -> None:
    run = Replay(capsys, strategy, backend, every=50)  # a heap commit writes a whole snapshot
    lines = stream_lines(400, payload=40)  # about 26 KiB of output
    expected, _ = reference(tmp_path, run, lines)
    assert len(expected) > 20 << 10
    source, state, output = write(tmp_path / "in.jsonl", lines), tmp_path / "st", small_tmpfs.path / "o"
    assert run(state, output, source) == ExitCode.IO
    assert f"cannot write output {output}: No space left on device" in run.err
    assert "run the same command again" in run.err and "Traceback" not in run.err
    small_tmpfs.resize("1m")
    assert run(state, output, source) == ExitCode.OK, run.err
    assert output.read_bytes() == expected


class FailingInput(io.BytesIO):
    """Standard input that fails with EIO when line ``at`` (0-based) is read."""

    def __init__(self, data: bytes, at: int) -> None:
        super().__init__(data)
        self.at = at
        self.read_lines = 0

    def readline(self, size: int | None = -1) -> bytes:
        if self.read_lines == self.at:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.read_lines += 1
        return super().readline(size)


class SignalledInput(io.BytesIO):
    """Standard input that sends ``signum`` to this process when line ``at`` is asked for:
    the run is waiting for input then."""

    def __init__(self, data: bytes, at: int, signum: int) -> None:
        super().__init__(data)
        self.at, self.signum = at, signum
        self.read_lines = 0

    def readline(self, size: int | None = -1) -> bytes:
        if self.read_lines == self.at:
            self.at = -1
            os.kill(os.getpid(), self.signum)
        self.read_lines += 1
        return super().readline(size)


@pytest.mark.parametrize(("strategy", "backend"), PAIRS)
def test_an_input_that_fails_to_read_stops_and_the_rerun_is_exact(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    strategy: str,
    backend: str,
) -> None:
    run = Replay(capsys, strategy, backend)
    lines = stream_lines()
    expected, _ = reference(tmp_path, run, lines)
    data = "".join(lines).encode()
    state, output = tmp_path / "st", tmp_path / "o"
    stdin_of(monkeypatch, FailingInput(data, BAD_AT))
    assert run(state, output, "-") == ExitCode.IO
    assert "cannot read input stdin: Input/output error" in run.err and "state saved in" in run.err
    assert manifest(state)["lines"] == BAD_AT
    stdin_of(monkeypatch, io.BytesIO(data))
    assert run(state, output, "-") == ExitCode.OK, run.err
    assert output.read_bytes() == expected


@pytest.mark.parametrize(("strategy", "backend"), PAIRS)
def test_a_signal_stops_at_a_line_boundary_and_the_rerun_is_exact(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    strategy: str,
    backend: str,
) -> None:
    run = Replay(capsys, strategy, backend)
    lines = stream_lines()
    expected, _ = reference(tmp_path, run, lines)
    data = "".join(lines).encode()
    source, output = write(tmp_path / "in.jsonl", lines), tmp_path / "o"
    # SIGTERM while line BAD_AT is processed: that line is finished, then the run stops.
    line = processing.LineProcessor.line

    def signalled(processor: processing.LineProcessor, raw: bytes, index: int, number: int) -> None:
        line(processor, raw, index, number)
        if index == BAD_AT:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(processing.LineProcessor, "line", signalled)
    assert run(tmp_path / "st", output, source) == 128 + signal.SIGTERM
    assert f"interrupted after {BAD_AT + 1} line(s); state saved" in run.err
    assert manifest(tmp_path / "st")["lines"] == BAD_AT + 1
    monkeypatch.setattr(processing.LineProcessor, "line", line)
    assert run(tmp_path / "st", output, source) == ExitCode.OK, run.err
    assert output.read_bytes() == expected
    # SIGINT while waiting for line BAD_AT of stdin: the lines before it are applied.
    stdin_of(monkeypatch, SignalledInput(data, BAD_AT, signal.SIGINT))
    assert run(tmp_path / "st2", output, "-") == 128 + signal.SIGINT
    assert manifest(tmp_path / "st2")["lines"] == BAD_AT
    stdin_of(monkeypatch, io.BytesIO(data))
    assert run(tmp_path / "st2", output, "-") == ExitCode.OK, run.err
    assert output.read_bytes() == expected
