"""``upsertmat replay --state-dir``: split runs equal one run, a mismatched run and damaged or foreign
state are refused, byte backends keep their state in the directory (and resume where a killed
run committed)."""

from __future__ import annotations

import itertools
import json
import os
import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from upsertmat.errors import ExitCode
from upsertmat.impls import available
from upsertmat.impls.persistence import MANIFEST_NAME
from upsertmat.impls.settings import Backend

from ..conftest import Cli
from ..prerequisites import requires
from .support import (
    GOOD,
    HEAP_STRATEGIES,
    SCRIPT,
    lines,
    random_stream,
    script,
)


@pytest.mark.parametrize("strategy", HEAP_STRATEGIES)
def test_split_runs_over_a_state_dir_equal_one_run(cli: Cli, tmp_path: Path, strategy: str) -> None:
    stream = random_stream(seed=7, size=400)
    flags = ["--pk", "0", "--upsert-key", "2", "-q", "--strategy", strategy]
    whole = cli("replay", *flags, stdin="".join(stream))
    assert whole.code == 0
    cuts = [0, 0, 1, 57, 58, 200, 399, 400, 400]
    parts = []
    for start, stop in itertools.pairwise(cuts):
        part = cli(
            "replay",
            *flags,
            "--state-dir",
            tmp_path / "st",
            "--stream-line",
            str(start),
            stdin="".join(stream[start:stop]),
        )
        assert part.code == 0
        parts.append(part.out)
    assert "".join(parts) == whole.out
    manifest = json.loads((tmp_path / "st" / MANIFEST_NAME).read_text())
    assert manifest["lines"] == 400
    assert manifest["strategy"] == strategy
    assert [p.name for p in (tmp_path / "st").iterdir() if p.name.startswith("snapshot-")] == [
        manifest["snapshot"]
    ]


@pytest.mark.parametrize(
    ("second", "message"),
    [
        (["--pk", "1"], "this run's --pk is 1 but the state directory's is 0"),
        (
            ["--pk", "0", "--upsert-key", "1"],
            "this run's --upsert-key is 1 but the state directory's is (none)",
        ),
        (
            ["--pk", "0", "--strategy", "map"],
            "this run's strategy (table.exec.sink.upsert-materialize-strategy.type)",
        ),
        (
            ["--pk", "0", "--set", "state.backend.type=rocksdb"],
            "this run's backend (state.backend.type) is rocksdb",
        ),
        (["--pk", "0", "--arity", "3"], "this run's --arity is 3 but the stream's arity is 2"),
    ],
)
def test_a_mismatched_run_is_refused(cli: Cli, tmp_path: Path, second: list[str], message: str) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD)).code == 0
    before = (tmp_path / MANIFEST_NAME).read_text()
    result = cli("replay", *second, "--state-dir", tmp_path, stdin=lines(*GOOD))
    assert result.code == ExitCode.STATE_DIR
    assert message in result.err
    assert str(tmp_path / MANIFEST_NAME) in result.err
    assert (tmp_path / MANIFEST_NAME).read_text() == before


def damage_snapshot(directory: Path, edit: Callable[[bytes], bytes], fix_checksum: bool) -> Path:
    manifest_path = directory / MANIFEST_NAME
    manifest = json.loads(manifest_path.read_text())
    snapshot = directory / str(manifest["snapshot"])
    snapshot.write_bytes(edit(snapshot.read_bytes()))
    if fix_checksum:
        import hashlib

        manifest["snapshot_sha256"] = hashlib.sha256(snapshot.read_bytes()).hexdigest()
        manifest_path.write_text(json.dumps(manifest))
    return snapshot


@pytest.mark.parametrize(
    ("edit", "fix_checksum", "message"),
    [
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), False, "its SHA-256 does not match"),
        (lambda data: data[: len(data) // 2], False, "its SHA-256 does not match"),
        (lambda data: data[: len(data) - 3], True, "truncated (no trailer)"),
        (lambda data: b"\x93\x01\x02\x03" + data, True, "not an upsertmat heap snapshot"),
        (lambda data: b"", True, "not an upsertmat heap snapshot"),
    ],
)
def test_a_damaged_snapshot_is_refused(
    cli: Cli, tmp_path: Path, edit: Callable[[bytes], bytes], fix_checksum: bool, message: str
) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD[:2])).code == 0
    snapshot = damage_snapshot(tmp_path, edit, fix_checksum)
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[2]))
    assert result.code == ExitCode.STATE_DIR
    assert f"damaged snapshot {snapshot}" in result.err
    assert message in result.err
    assert result.out == ""


def test_a_snapshot_with_a_row_under_the_wrong_key_is_refused(cli: Cli, tmp_path: Path) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[0])).code == 0
    # row [1, "a"] (msgpack 92 01 a1 61) becomes [2, "a"] under key [1]: valid msgpack, right checksum
    damage_snapshot(tmp_path, lambda data: data.replace(b"\x91\x92\x01\xa1a", b"\x91\x92\x02\xa1a"), True)
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin="")
    assert result.code == ExitCode.STATE_DIR
    assert "a row is stored under a context key that is not its own" in result.err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"format": "something-else", "version": 1}', "not an upsertmat state manifest"),
        (
            '{"format": "upsertmat-replay-state", "version": 99}',
            "has format version 99; this upsertmat reads",
        ),
        ('{"format": "upsertmat-replay-state", "version": 1, "pk": "0"}', "'pk' must be a list of integers"),
        ("", "not valid JSON"),
    ],
)
def test_a_damaged_manifest_is_refused(cli: Cli, tmp_path: Path, content: str, message: str) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD[:2])).code == 0
    (tmp_path / MANIFEST_NAME).write_text(content)
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(GOOD[2]))
    assert result.code == ExitCode.STATE_DIR
    assert str(tmp_path / MANIFEST_NAME) in result.err
    assert message in result.err


def test_a_lost_manifest_or_a_foreign_directory_is_refused(cli: Cli, tmp_path: Path) -> None:
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin=lines(*GOOD[:2])).code == 0
    (tmp_path / MANIFEST_NAME).unlink()
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path, stdin="")
    assert result.code == ExitCode.STATE_DIR
    assert f"{tmp_path} has no manifest.json but is not empty (snapshot-" in result.err
    (tmp_path / "file").write_text("x")
    assert cli("replay", "--pk", "0", "--state-dir", tmp_path / "file", stdin="").code == ExitCode.STATE_DIR


BYTE_PAIRS = [
    (strategy.value, backend.value)
    for strategy, backend in available()
    if backend in (Backend.ROCKSDB, Backend.LMDB) and strategy.value in ("MAP", "SORTED")
]


@pytest.mark.parametrize(("strategy", "backend"), BYTE_PAIRS)
def test_byte_backends_keep_their_state_in_the_state_dir(
    cli: Cli, tmp_path: Path, strategy: str, backend: str
) -> None:
    stream = random_stream(seed=11, size=120)
    flags = ["--pk", "0", "-q", "--strategy", strategy, "--backend", backend]
    whole = cli("replay", *flags, stdin="".join(stream))
    assert whole.out == cli("replay", "--pk", "0", "-q", stdin="".join(stream)).out
    first = cli("replay", *flags, "--state-dir", tmp_path, stdin="".join(stream[:50]))
    second = cli("replay", *flags, "--state-dir", tmp_path, "--stream-line", "50", stdin="".join(stream[50:]))
    assert (first.code, second.code) == (0, 0)
    assert first.out + second.out == whole.out
    manifest = json.loads((tmp_path / MANIFEST_NAME).read_text())
    assert (manifest["snapshot"], manifest["in_progress"], manifest["lines"]) == (None, False, 120)
    assert (tmp_path / backend).is_dir()


@requires(any(b == "rocksdb" for _, b in BYTE_PAIRS), "the rocksdb backend (rocksdict, a base dependency)")
def test_a_killed_byte_backend_run_resumes_from_its_committed_position(tmp_path: Path) -> None:
    """Crash recovery (more in tests/lifecycle/test_crash_recovery.py): same input, nothing lost.

    A line's output is flushed before its position commits (so a crash can repeat it on stdout
    but never lose it): once line 1's output is read, line 0 is surely committed; line 1 may be.
    """
    flags: list[str | Path] = [
        "replay",
        "--pk",
        "0",
        "--strategy",
        "map",
        "--backend",
        "rocksdb",
        "--state-dir",
        tmp_path,
        "--checkpoint-every",
        "1",
    ]
    outputs = [
        '{"in": 0, "op": "+I", "row": [1, "a"]}\n',
        '{"in": 1, "op": "+I", "row": [2, "b"]}\n',
        '{"in": 2, "op": "-D", "row": [1, "a"]}\n',
    ]
    process = subprocess.Popen(
        [SCRIPT, *map(str, flags)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(lines(GOOD[0], GOOD[1]))
    process.stdin.flush()
    assert [process.stdout.readline(), process.stdout.readline()] == outputs[:2]
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    shorter = script(*flags)
    assert shorter.returncode == ExitCode.STATE_DIR
    committed = re.search(r"stopped after \d+ bytes = stream line (\d+) of its input", shorter.stderr)
    assert committed is not None and committed.group(1) in ("1", "2"), shorter.stderr
    assert "this input does not begin with those bytes" in shorter.stderr
    again = script(*flags, stdin=lines(*GOOD))
    assert again.returncode == 0
    assert again.stdout == "".join(outputs[int(committed.group(1)) :])
