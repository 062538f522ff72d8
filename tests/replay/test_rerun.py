"""Rerunning ``replay`` is always safe, and the CLI's first-contact behaviours (docs/cli.md)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from upsertmat.errors import ExitCode
from upsertmat.impls.persistence import MANIFEST_NAME

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "out-of-order.jsonl"
EXPECTED = ROOT / "examples" / "out-of-order.expected.jsonl"
SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))


def replay(*argv: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, "replay", *map(str, argv)], input=stdin, capture_output=True, text=True, timeout=120
    )


def state_files(directory: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(directory)): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name not in ("lock", "upsertmat.lock", "LOCK") and "LOG" not in path.name
    }


@pytest.mark.parametrize("backend", ["heap", "rocksdb", "lmdb"])
def test_the_same_command_twice_leaves_output_and_state_unchanged(tmp_path: Path, backend: str) -> None:
    state, out = tmp_path / "st", tmp_path / "out.jsonl"
    args: list[str | Path] = ["--pk", "0", "--backend", backend, "--strategy", "map",
                              "--state-dir", state, "-o", out, EXAMPLE]  # fmt: skip
    first = replay(*args)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == EXPECTED.read_bytes()
    manifest = (tmp_path / "st" / MANIFEST_NAME).read_bytes()
    second = replay(*args)
    assert second.returncode == 0, second.stderr
    assert "was already applied completely by run 1 (stream lines 0 to 23); nothing to do" in second.stderr
    assert (tmp_path / "out.jsonl").read_bytes() == EXPECTED.read_bytes()
    assert (tmp_path / "st" / MANIFEST_NAME).read_bytes() == manifest


def test_a_continuation_is_not_a_rerun_and_an_earlier_run_is_recognised(tmp_path: Path) -> None:
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    part1, part2 = tmp_path / "p1.jsonl", tmp_path / "p2.jsonl"
    part1.write_text("".join(lines[:10]))
    part2.write_text("".join(lines[10:]))
    state: list[str | Path] = ["--pk", "0", "-q", "--state-dir", tmp_path / "st"]
    outs = [replay(*state, "-o", tmp_path / f"o{n}", path) for n, path in enumerate((part1, part2))]
    assert [out.returncode for out in outs] == [0, 0]
    assert (tmp_path / "o0").read_text() + (tmp_path / "o1").read_text() == EXPECTED.read_text()
    # part 1 again (a script rerun): recognised although it is not the last run
    assert "already applied completely by run 1" in replay(*state, part1).stderr


def test_a_grown_file_names_the_stream_line_to_pass(tmp_path: Path) -> None:
    lines = EXAMPLE.read_text().splitlines(keepends=True)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(lines[:10]))
    args: list[str | Path] = [
        "--pk",
        "0",
        "-q",
        "--state-dir",
        tmp_path / "st",
        "-o",
        tmp_path / "out",
        source,
    ]
    assert replay(*args).returncode == 0
    source.write_text("".join(lines))
    refused = replay(*args)
    assert refused.returncode == ExitCode.STATE_DIR
    assert "begins with the whole input of run 1 (stream lines 0 to 9) and has more" in refused.stderr
    assert "pass --stream-line 0" in refused.stderr
    rest = replay(*args[:-3], "--stream-line", "0", "-o", tmp_path / "rest", source)
    assert rest.returncode == 0, rest.stderr
    whole = EXPECTED.read_text().splitlines(keepends=True)
    assert (tmp_path / "out").read_text() + (tmp_path / "rest").read_text() == "".join(whole)


def test_stdin_after_the_first_run_needs_an_explicit_position(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    state: list[str | Path] = ["--pk", "0", "-q", "--state-dir", tmp_path / "st"]
    first = replay(*state, stdin=text)
    assert first.returncode == 0
    again = replay(*state, stdin=text)
    assert again.returncode == ExitCode.STATE_DIR
    assert "cannot tell a rerun from a continuation" in again.stderr
    assert "--stream-line N" in again.stderr and again.stdout == ""
    rerun = replay(*state, "--stream-line", "0", stdin=text)  # the same lines again: all applied before
    assert (rerun.returncode, rerun.stdout) == (0, "")
    beyond = replay(*state, "--stream-line", "25", stdin=text)
    assert beyond.returncode == ExitCode.STATE_DIR and "lines would be missing" in beyond.stderr


def test_a_reader_that_leaves_during_the_last_line_is_not_success(tmp_path: Path) -> None:
    """`replay big.jsonl | head -c 100`: exit 141 also when the broken line was the last one."""
    source = tmp_path / "one.jsonl"
    source.write_text(json.dumps({"op": "+I", "row": [1, "x" * 300_000]}) + "\n")
    process = subprocess.Popen([SCRIPT, "replay", "--pk", "0", str(source)], stdout=subprocess.PIPE)
    assert process.stdout is not None
    assert os.read(process.stdout.fileno(), 100)
    process.stdout.close()
    assert process.wait(timeout=60) == 128 + signal.SIGPIPE


def test_long_integers_have_a_stated_limit_and_an_option(tmp_path: Path) -> None:
    source = tmp_path / "big.jsonl"
    source.write_text('{"op": "+I", "row": [' + "9" * 5000 + ", 1]}\n")
    refused = replay("--pk", "0", source)
    assert refused.returncode == ExitCode.BAD_INPUT
    assert "an integer has more than 4300 digits" in refused.stderr and "--max-int-digits" in refused.stderr
    accepted = replay("--pk", "0", "--max-int-digits", "5000", source)
    assert accepted.returncode == 0 and ("9" * 5000) in accepted.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--on-error", "skip", "--dead-letter", "/nonexistent/dir/dl.jsonl"],
            "/nonexistent/dir does not exist",
        ),
        (["--checkpoint-every", "5"], "--checkpoint-every needs --state-dir"),
        (["--stream-line", "5"], "--stream-line needs --state-dir"),
    ],
)
def test_flags_that_would_be_silently_ignored_are_usage_errors(argv: list[str], message: str) -> None:
    result = replay("--pk", "0", *argv, EXAMPLE)
    assert result.returncode == ExitCode.USAGE
    assert message in result.stderr


def test_the_conflict_strategy_is_part_of_the_state_directory(tmp_path: Path) -> None:
    first, second = tmp_path / "in1.jsonl", tmp_path / "in2.jsonl"
    first.write_text('{"op": "+I", "row": [1, "a"]}\n{"time": 5}\n')
    second.write_text('{"op": "+I", "row": [2, "b"]}\n')
    nothing = ["--set", "table.exec.sink.conflict-strategy=NOTHING"]
    state: list[str | Path] = ["--pk", "0", "--backend", "rocksdb", "--state-dir", tmp_path / "st"]
    assert replay(*state, *nothing, first).returncode == 0
    switched = replay(*state, second)
    assert switched.returncode == ExitCode.STATE_DIR
    assert "conflict strategy (table.exec.sink.conflict-strategy) is DEDUPLICATE" in switched.stderr
    heap = replay("--pk", "0", *nothing, "--state-dir", tmp_path / "heap", first)
    assert heap.returncode == ExitCode.USAGE
    assert "ON CONFLICT DO NOTHING on heap cannot export its state" in heap.stderr


def upsertmat(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *map(str, argv)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_savepoint_completes_a_run_killed_after_its_final_commit_as_a_rerun_would(
    tmp_path: Path, backend: str
) -> None:
    """The database says the run finished; the manifest, saved before the kill, says it began.

    ``savepoint`` follows the rerun rules (the run is complete) instead of refusing, writes the
    savepoint of the finished run, and the manifest is brought up to date.
    """
    state, out = tmp_path / "st", tmp_path / "out.jsonl"
    args: list[str | Path] = ["--pk", "0", "--backend", backend, "--strategy", "map", "-q",
                              "--state-dir", state, "-o", out, EXAMPLE]  # fmt: skip
    assert replay(*args).returncode == 0
    finished = json.loads((state / MANIFEST_NAME).read_text())
    begun = dict(finished, in_progress=True, runs=[], lines=0, now=0, retract_misses=0, output_bytes=0,
                 input_bytes=0, input_sha256=hashlib.sha256(b"").hexdigest())  # fmt: skip
    (state / MANIFEST_NAME).write_text(json.dumps(begun))
    saved = upsertmat("savepoint", "--state-dir", state, "-o", tmp_path / "sp")
    assert saved.returncode == 0, saved.stderr
    assert "stream line 24" in saved.stderr
    completed = json.loads((state / MANIFEST_NAME).read_text())
    assert (completed["in_progress"], completed["lines"], completed["runs"]) == (False, 24, finished["runs"])
    summary = json.loads(upsertmat("inspect", tmp_path / "sp").stdout)
    assert summary["extra"]["lines"] == 24 and summary["retract_misses"] == 1
    # The restored directory recognises the run: the same command on it is a rerun.
    restored = tmp_path / "st2"
    assert upsertmat("restore", tmp_path / "sp", "--state-dir", restored, "--strategy", "sorted",
                     "--backend", backend).returncode == 0  # fmt: skip
    again = replay("--pk", "0", "--backend", backend, "--strategy", "sorted", "--state-dir", restored,
                   "-o", tmp_path / "out2.jsonl", EXAMPLE)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "was already applied completely by run 1" in again.stderr


def test_heap_snapshots_keep_big_integers_and_version_2_snapshots_still_open(tmp_path: Path) -> None:
    """Version 3 heap snapshots encode values as the byte backends do (extension type 1 = two's
    complement); a version 2 snapshot (extension type 1 = decimal text) is still read."""
    import msgpack

    big = 3**70  # beyond 64 bits
    changes = [{"op": "+I", "row": [1, big, "a"]}, {"op": "+I", "row": [2, -big, "b"]},
               {"op": "-U", "row": [1, big, "a"]}, {"op": "+U", "row": [1, big + 1, "c"]}]  # fmt: skip
    lines = [json.dumps(change) + "\n" for change in changes]
    (tmp_path / "all.jsonl").write_text("".join(lines))
    (tmp_path / "p1.jsonl").write_text("".join(lines[:2]))
    (tmp_path / "p2.jsonl").write_text("".join(lines[2:]))
    whole = replay("--pk", "0", "-q", tmp_path / "all.jsonl")
    assert whole.returncode == 0, whole.stderr
    for version in (3, 2):
        state = tmp_path / f"st{version}"
        assert (
            replay(
                "--pk", "0", "-q", "--state-dir", state, "-o", tmp_path / "o1", tmp_path / "p1.jsonl"
            ).returncode
            == 0
        )
        snapshot = next(state.glob("snapshot-*.msgpack"))
        items = list(
            msgpack.Unpacker(snapshot.open("rb"), raw=False, ext_hook=lambda code, data: (code, data))
        )
        assert items[0]["version"] == 3
        assert items[1][1][0][1] == (1, big.to_bytes((big.bit_length() + 8) // 8, "big", signed=True))
        if version == 2:

            def decimal(value: object) -> object:
                if isinstance(value, tuple):  # the (code, data) pairs read above
                    return msgpack.ExtType(1, str(int.from_bytes(value[1], "big", signed=True)).encode())
                return [decimal(item) for item in value] if isinstance(value, list) else value

            data = b"".join(
                msgpack.packb(decimal(item), use_bin_type=True)
                for item in [{**items[0], "version": 2}, *items[1:]]
            )
            snapshot.write_bytes(data)
            manifest = json.loads((state / MANIFEST_NAME).read_text())
            manifest["snapshot_sha256"] = hashlib.sha256(data).hexdigest()
            (state / MANIFEST_NAME).write_text(json.dumps(manifest))
        second = replay("--pk", "0", "-q", "--state-dir", state, "-o", tmp_path / "o2", tmp_path / "p2.jsonl")
        assert second.returncode == 0, second.stderr
        both = [json.loads(line) for line in (tmp_path / "o1").read_text().splitlines()]
        both += [json.loads(line) for line in (tmp_path / "o2").read_text().splitlines()]
        assert both == [json.loads(line) for line in whole.stdout.splitlines()]
