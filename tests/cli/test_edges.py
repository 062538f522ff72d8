"""The edges of the data commands, each found by the reliability campaign (issue #33, item 7)
and pinned here: a value nested almost as deep as the JSON parser allows, times beyond what
state can store, files a run writes that name its input, the ``--misses`` file after a stop
and a failed write, stdout on a full device or cut short by its reader, and what ``--help``
says about exit codes."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from upsertmat.cli import build_parser, main
from upsertmat.errors import ExitCode
from upsertmat.replay.jsonl import MAX_NESTING

from ..conftest import Cli
from ..prerequisites import requires

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
FULL = Path("/dev/full")
needs_dev_full = requires(FULL.exists(), "/dev/full (a device that is always full)")


def change(op: str, *row: object, **fields: object) -> str:
    return json.dumps({"op": op, "row": list(row), **fields}) + "\n"


def nested(depth: int, leaf: str = "") -> str:
    """A JSON array nested ``depth`` deep."""
    return "[" * depth + leaf + "]" * depth


def deep_line(op: str, line_depth: int, leaf: str = "") -> str:
    """A change line whose own object and row are two levels, the value in column 1 the rest."""
    return f'{{"op": "{op}", "row": [1, {nested(line_depth - 2, leaf)}]}}\n'


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- X3: nesting -------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_values_nested_up_to_the_limit_replay_explain_and_check(
    cli: Cli, tmp_path: Path, backend: str
) -> None:
    """At the limit everything works: materializing, the misses file, check-keys (the campaign's
    RecursionError at 983-990 deep was an internal error, exit 70)."""
    text = deep_line("+I", MAX_NESTING) + deep_line("-D", MAX_NESTING, "1")
    source = tmp_path / "in.jsonl"
    source.write_text(text)
    misses = tmp_path / "m.jsonl"
    done = cli("replay", "--pk", "0", "--backend", backend, "--misses", misses, source)
    assert done.code == 0, done.err
    assert json.loads(done.out)["row"] == json.loads(text.splitlines()[0])["row"]
    (record,) = [json.loads(line) for line in misses.read_text().splitlines()]
    assert record["cause"] == "differs"
    checked = cli("check-keys", "--pk", "0", source)
    assert checked.code == 1 and "differs: 1" in checked.out, checked.err


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 983, 990, 5_000])
def test_a_line_nested_beyond_the_limit_is_bad_input_that_skip_can_pass(
    cli: Cli, tmp_path: Path, depth: int
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(deep_line("+I", depth) + change("+I", 2, "ok"))
    message = f"line 1: arrays and objects nested more than {MAX_NESTING} deep"
    failed = cli("replay", "--pk", "0", source)
    assert failed.code == ExitCode.BAD_INPUT, failed.err
    assert failed.err.splitlines()[0].startswith(f"upsertmat replay: {message}")
    state = ["--state-dir", tmp_path / "st", "--backend", "rocksdb"]
    assert cli("replay", "--pk", "0", *state, source).code == ExitCode.BAD_INPUT
    skipped = cli("replay", "--pk", "0", *state, "--on-error", "skip", source)
    assert skipped.code == 0, skipped.err
    assert skipped.out == '{"in": 1, "op": "+I", "row": [2, "ok"]}\n'
    checked = cli("check-keys", "--pk", "0", source)
    assert checked.code == ExitCode.BAD_INPUT
    assert one_line(checked.err).startswith(f"upsertmat check-keys: {message}")


# -- times beyond what state stores ------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"time": 100000000000000000000}', "'time' must be at most 4611686018427387903 ms"),
        (change("+I", 1, "a", ts=10**20).strip(), "'ts' must be at most 4611686018427387903 ms"),
    ],
)
@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_a_time_beyond_2_to_the_62_ms_is_bad_input(cli: Cli, line: str, message: str, backend: str) -> None:
    """A stamp plus the TTL must fit the 64-bit integers state keys timers by (struct.error,
    exit 70 before)."""
    flags = ["--pk", "0", "--strategy", "MAP", "--ttl", "10", "--backend", backend]
    flags += ["--set", "upsertmat.state.ttl.time-domain=event_time"]
    failed = cli("replay", *flags, stdin=line + "\n" + change("+I", 2, "b", ts=1))
    assert failed.code == ExitCode.BAD_INPUT, failed.err
    assert failed.err.splitlines()[0].startswith(f"upsertmat replay: line 1: {message}")


def test_a_ttl_beyond_2_to_the_62_ms_is_a_configuration_error(cli: Cli) -> None:
    failed = cli("replay", "--pk", "0", "--ttl", str(10**20), stdin=change("+I", 1, "a"))
    assert failed.code == ExitCode.USAGE
    assert "table.exec.state.ttl" in one_line(failed.err) and "at most 4611686018427387903" in failed.err


# -- X5: a file a run writes that names its input ----------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        ["-o", "{input}"],
        ["--misses", "{input}"],
        ["--on-error", "skip", "--dead-letter", "{input}"],
        ["-o", "{link}"],
        ["-o", "out.jsonl", "--misses", "out.jsonl"],
    ],
    ids=["output", "misses", "dead-letter", "output-through-a-link", "output-and-misses"],
)
def test_a_file_written_that_names_the_input_or_another_output_is_refused_before_anything_is_written(
    cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "x.jsonl"
    text = change("+I", 1, "a") + change("-D", 1, "b") + "oops\n"
    source.write_text(text)
    (tmp_path / "link.jsonl").symlink_to(source)
    argv = [flag.format(input=source, link=tmp_path / "link.jsonl") for flag in flags]
    refused = cli("replay", "--pk", "0", *argv, "x.jsonl")
    assert refused.code == ExitCode.USAGE, refused.err
    assert "is the same file as" in one_line(refused.err)
    assert source.read_text() == text
    assert not (tmp_path / "out.jsonl").exists()


def test_an_output_naming_the_file_stdin_reads_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "x.jsonl"
    source.write_text(change("+I", 1, "a"))
    with open(source, "rb") as stdin:
        done = subprocess.run(
            [SCRIPT, "replay", "--pk", "0", "-o", str(source)], stdin=stdin, capture_output=True, text=True
        )
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "is the same file as" in done.stderr and source.read_text() == change("+I", 1, "a")


# -- X1, X2: the --misses file -----------------------------------------------------------------


def misses_stream(size: int) -> list[str]:
    """Every other line an ADD, every other a retraction of a row never added (a miss)."""
    lines = []
    for i in range(size):
        lines.append(change("+I", i % 50, i, "x"))
        lines.append(change("-D", i % 50, i + 1, "x"))
    return lines


@pytest.mark.parametrize("backend", ["heap", "rocksdb"])
def test_the_misses_file_resumes_with_the_run_like_the_output(cli: Cli, tmp_path: Path, backend: str) -> None:
    """A run stopped at a bad line, then rerun once the line is fixed: the misses file holds
    every miss once, as one uninterrupted run writes it (the rerun truncated it before)."""
    lines = misses_stream(400)
    fixed = tmp_path / "in.jsonl"
    fixed.write_text("".join(lines))
    flags = ["--pk", "0", "-q", "--backend", backend, "--checkpoint-every", "97"]
    whole = cli("replay", *flags, "--state-dir", tmp_path / "ref", "-o", tmp_path / "ref.out",
                "--misses", tmp_path / "ref.m", fixed)  # fmt: skip
    assert whole.code == 0, whole.err
    source = tmp_path / "run.jsonl"
    source.write_text("".join(lines[:601]) + "oops\n" + "".join(lines[602:]))
    argv = ["replay", *flags, "--state-dir", tmp_path / "st", "-o", tmp_path / "out",
            "--misses", tmp_path / "m", source]  # fmt: skip
    assert cli(*argv).code == ExitCode.BAD_INPUT
    source.write_text("".join(lines))
    assert cli(*argv).code == 0
    assert (tmp_path / "out").read_bytes() == (tmp_path / "ref.out").read_bytes()
    assert (tmp_path / "m").read_bytes() == (tmp_path / "ref.m").read_bytes()
    assert len((tmp_path / "m").read_text().splitlines()) == 400
    manifest = json.loads((tmp_path / "st" / "manifest.json").read_text())
    assert manifest["retract_misses"] == 400


def test_the_misses_file_after_a_sigterm_resumes_exactly(tmp_path: Path) -> None:
    """SIGTERM while the run waits for input: committed up to the last line, the same command
    again goes on, and the misses file ends as one run writes it."""
    lines = misses_stream(200)
    flags = ["replay", "--pk", "0", "-q", "--backend", "lmdb", "--checkpoint-every", "13"]
    reference = ["--state-dir", str(tmp_path / "ref"), "--misses", str(tmp_path / "ref.m"), "-"]
    ref = subprocess.run([SCRIPT, *flags, *reference], input="".join(lines), capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr
    state = ["--state-dir", str(tmp_path / "st"), "--misses", str(tmp_path / "m"), "-o", str(tmp_path / "o")]
    process = subprocess.Popen([SCRIPT, *flags, *state, "-"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stderr is not None
    process.stdin.write("".join(lines[:250]).encode())
    process.stdin.flush()
    output, deadline = tmp_path / "o", time.monotonic() + 120
    while not output.exists() or output.stat().st_size < 3_000:  # ~75 changes out: the run is going
        assert time.monotonic() < deadline and process.poll() is None
        time.sleep(0.01)
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 128 + signal.SIGTERM
    process.stdin.close()
    process.stderr.close()
    again = subprocess.run([SCRIPT, *flags, *state, "--stream-line", "0", "-"], input="".join(lines),
                           capture_output=True, text=True)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "m").read_bytes() == (tmp_path / "ref.m").read_bytes()


@needs_dev_full
def test_a_misses_file_on_a_full_device_is_one_line_exit_4(cli: Cli, tmp_path: Path) -> None:
    done = cli("replay", "--pk", "0", "-q", "--misses", FULL, "-o", tmp_path / "o",
               stdin="".join(misses_stream(3000)))  # fmt: skip
    assert done.code == ExitCode.IO
    assert one_line(done.err).startswith(f"upsertmat replay: cannot write misses file {FULL}: No space left")


# -- C2, C3, C5: check-keys and inspect --------------------------------------------------------


def test_check_keys_accepts_the_max_int_digits_it_suggests(cli: Cli, tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    source.write_text('{"op": "+I", "row": [1, 1' + "0" * 4_400 + "]}\n")
    refused = cli("check-keys", "--pk", "0", source)
    assert refused.code == ExitCode.BAD_INPUT and "--max-int-digits N" in refused.err
    accepted = cli("check-keys", "--pk", "0", "--max-int-digits", "5000", source)
    assert accepted.code == 0, accepted.err
    assert "check-keys: OK: 1 change(s) in 1 line(s)" in accepted.out


def test_check_keys_of_a_missing_input_is_a_usage_error(cli: Cli, tmp_path: Path) -> None:
    done = cli("check-keys", "--pk", "0", tmp_path / "nonexistent")
    assert done.code == ExitCode.USAGE
    assert one_line(done.err) == (
        f"upsertmat check-keys: cannot open input {tmp_path / 'nonexistent'}: No such file or directory"
    )


@pytest.fixture(scope="module")
def savepoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("sp")
    source = directory / "in.jsonl"
    source.write_text("".join(misses_stream(20)))
    assert main(["replay", "--pk", "0", "-q", "--state-dir", str(directory / "st"), "-o", os.devnull,
                 str(source)]) == 0  # fmt: skip
    assert main(["savepoint", "--state-dir", str(directory / "st"), "-o", str(directory / "sp")]) == 0
    return directory


@needs_dev_full
@pytest.mark.parametrize(
    "argv",
    [
        ["check-keys", "--pk", "0", "in.jsonl"],
        ["check-keys", "--pk", "0", "--format", "json", "in.jsonl"],
        ["inspect", "sp"],
        ["compile-plan", "{job}", "-o", "-"],
        ["explain-plan", "plan.json"],
    ],
    ids=["check-keys", "check-keys-json", "inspect", "compile-plan", "explain-plan"],
)
def test_data_on_a_full_stdout_is_one_line_exit_4(savepoint: Path, argv: list[str]) -> None:
    job = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "users-levels.yaml"
    if not (savepoint / "plan.json").exists():
        assert main(["compile-plan", str(job), "-o", str(savepoint / "plan.json")]) == 0
    argv = [arg.format(job=job) for arg in argv]
    with open(FULL, "wb") as full:
        done = subprocess.run([SCRIPT, *argv], stdout=full, stderr=subprocess.PIPE, text=True, cwd=savepoint)
    assert done.returncode == ExitCode.IO, done.stderr
    assert one_line(done.stderr) == f"upsertmat {argv[0]}: cannot write stdout: No space left on device"


@pytest.mark.parametrize("argv", [["check-keys", "--pk", "0", "in.jsonl"], ["inspect", "sp"]])
def test_a_report_cut_short_by_its_reader_exits_141(savepoint: Path, argv: list[str]) -> None:
    """`check-keys ... | head -c 1`: the reader took one byte of a report that fits the pipe
    and left (exit 1 before, the report silently cut)."""
    command = subprocess.Popen([SCRIPT, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=savepoint)
    assert command.stdout is not None and command.stderr is not None
    head = subprocess.run(["head", "-c", "1"], stdin=command.stdout, capture_output=True)
    command.stdout.close()
    assert command.wait(timeout=120) == ExitCode.CLOSED_PIPE
    assert (head.stdout, command.stderr.read()) == (b"k" if argv[0] == "check-keys" else b"{", b"")
    command.stderr.close()


# -- item 8: what --help says ------------------------------------------------------------------


def help_of(command: str) -> str:
    parser = build_parser()
    (choices,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return str(choices.choices[command].format_help())


@pytest.mark.parametrize(
    ("command", "codes"),
    [
        ("replay", ["0 ok", "1 bad input", "2 usage", "3 state", "4 I/O", "70 internal", "130/143", "141"]),
        ("check-keys", ["0 ", "1 ", "2 usage", "4 ", "141"]),
        ("savepoint", ["0 ok", "2 usage", "3 state", "4 I/O"]),
        ("restore", ["0 ok", "2 usage", "3 state", "4 I/O"]),
        ("inspect", ["0 ok", "2 usage", "3 state", "4 I/O", "141"]),
        ("compile-plan", ["0 written", "2 usage", "4 I/O", "141"]),
        ("explain-plan", ["0 a valid plan", "2 not a valid plan", "4 I/O", "141"]),
    ],
)
def test_help_names_the_exit_codes(command: str, codes: list[str]) -> None:
    text = " ".join(help_of(command).split())
    assert "exit codes:" in text
    tail = text.split("exit codes:", 1)[1]
    assert all(code in tail for code in codes), tail
