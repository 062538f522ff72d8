"""A full disk, for real: a size-limited tmpfs under the state directory (or the output).

Every backend must report it in one clear line naming the path (exit 4, no traceback), leave
the state directory at its last commit, and, once the file system has room again (a remount
with a larger size), the same command must finish the run with exactly the output of an
uninterrupted run. The disk fills at every stage: locking and creating the state directory
and the database, opening a database whose log must be written back, writing and committing,
closing, the dead-letter file, the output, a savepoint, a restore. Needs root and a kernel
that lets this process mount tmpfs; skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from upsertmat.cli import main
from upsertmat.errors import ExitCode

if TYPE_CHECKING:
    from ..conftest import Tmpfs  # the fixture's type (tests/conftest.py)

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
BACKENDS = {"heap": "MAP", "rocksdb": "MAP", "lmdb": "SORTED"}


def source(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    with path.open("w") as stream:
        for i in range(40_000):
            row = [i % 3000, i % 7, "x" * 300]
            stream.write(json.dumps({"op": "+I" if i % 5 else "-U", "row": row}) + "\n")
    return path


def replay(backend: str, state: Path, output: Path, input_path: Path) -> subprocess.CompletedProcess[str]:
    args = [SCRIPT, "replay", "--pk", "0", "--upsert-key", "1", "-q", "--backend", backend, "--strategy",
            BACKENDS[backend], "--state-dir", str(state), "-o", str(output), str(input_path)]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("full", ["state", "output"])
def test_a_full_disk_is_a_clear_error_and_the_rerun_is_exact(
    tmp_path: Path, small_tmpfs: Tmpfs, backend: str, full: str
) -> None:
    input_path = source(tmp_path)
    small_fs = small_tmpfs.path
    reference = replay(backend, tmp_path / "ref-state", tmp_path / "ref.jsonl", input_path)
    assert reference.returncode == 0, reference.stderr
    state = small_fs / "st" if full == "state" else tmp_path / "st"
    output = small_fs / "out.jsonl" if full == "output" else tmp_path / "out.jsonl"
    failed = replay(backend, state, output, input_path)
    assert failed.returncode == ExitCode.IO, failed.stderr
    assert "Traceback" not in failed.stderr and "internal error" not in failed.stderr
    assert "No space left on device" in failed.stderr or "cannot reserve" in failed.stderr
    assert str(small_fs) in failed.stderr
    assert "run the same command again" in failed.stderr
    small_tmpfs.resize("256m")
    again = replay(backend, state, output, input_path)
    assert again.returncode == 0, again.stderr
    assert output.read_bytes() == (tmp_path / "ref.jsonl").read_bytes()


@pytest.mark.parametrize("small_tmpfs", ["160k"], indirect=True)
def test_a_full_disk_while_committing_is_one_line_not_a_close_warning_first(
    tmp_path: Path, small_tmpfs: Tmpfs
) -> None:
    """The commit fails, then closing the database fails the same way: only the commit's
    error is said (a warning that closing failed came first before)."""
    lines = "".join(json.dumps({"op": "+I", "row": [i % 50, i, "x" * 20]}) + "\n" for i in range(8000))
    (tmp_path / "in.jsonl").write_text(lines)
    state, out = small_tmpfs.path / "st", tmp_path / "out"
    args = [SCRIPT, "replay", "--pk", "0", "-q", "--backend", "rocksdb", "--checkpoint-every", "100",
            "--state-dir", str(state), "-o", str(out), str(tmp_path / "in.jsonl")]  # fmt: skip
    failed = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert failed.returncode == ExitCode.IO, failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
    assert "No space left on device" in failed.stderr and "warning" not in failed.stderr


def clear(fs: Tmpfs, size: str) -> None:
    """Empty the tmpfs and give it ``size``."""
    for entry in fs.path.iterdir():
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    fs.resize(size)


def fill(fs: Tmpfs) -> None:
    """Take every free block of the tmpfs."""
    with open(fs.path / "filler", "wb", buffering=0) as stream:
        try:
            while True:
                stream.write(b"\0" * 4096)
        except OSError:
            pass


def full_then_room(
    capsys: pytest.CaptureFixture[str],
    fs: Tmpfs,
    argv: list[str],
    result: Callable[[], object],
    expected: object,
) -> int:
    """Run ``argv`` on the (full) tmpfs: exit 0, or 4 with one line naming it; then with room
    again the same command must end with ``expected``. Returns the first exit code."""
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err, err
    assert code in (ExitCode.OK, ExitCode.IO), err
    if code == ExitCode.IO:
        assert "warning: closing the state failed" not in err, err  # the failure is said once
        last = err.strip().splitlines()[-1]
        assert ("No space left on device" in last or "cannot reserve" in last) and str(fs.path) in last, err
        (fs.path / "filler").unlink(missing_ok=True)
        fs.resize("64m")
        again = main(argv)
        assert again == ExitCode.OK, capsys.readouterr().err
        capsys.readouterr()
    assert result() == expected
    return code


SIZES = ["4k", "8k", "16k", "32k", "64k", "160k", "400k", "24m"]  # the last fits (LMDB reserves 16 MiB ahead)


@pytest.mark.slow
@pytest.mark.parametrize("backend", list(BACKENDS))
def test_a_full_disk_at_every_stage_is_one_line_and_the_rerun_is_exact(
    tmp_path: Path, small_tmpfs: Tmpfs, capsys: pytest.CaptureFixture[str], backend: str
) -> None:
    fs = small_tmpfs
    lines = [
        json.dumps({"op": "+I" if i % 5 else "-U", "row": [i % 300, i % 7, "x" * 30]}) + "\n"
        for i in range(3000)
    ]
    lines[100:2900:97] = ["not json " + "z" * 300 + "\n"] * len(lines[100:2900:97])  # 11 KiB of dead letters
    source = tmp_path / "in.jsonl"
    source.write_text("".join(lines))
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"op": "+I", "row": [i, 1, "y"]}) + "\n" for i in range(200)))
    flags = ["--pk", "0", "--upsert-key", "1", "-q", "--backend", backend, "--strategy", BACKENDS[backend],
             "--on-error", "skip"]  # fmt: skip
    ref = tmp_path / "ref"
    assert main(["replay", *flags, "--state-dir", str(ref / "st"), "-o", str(ref / "out"), str(source)]) == 0
    assert main(["replay", *flags, "--state-dir", str(ref / "st"), "-o", str(ref / "out2"), str(more)]) == 0
    assert main(["savepoint", "--state-dir", str(ref / "st"), "-o", str(ref / "sp")]) == 0
    capsys.readouterr()
    expected_out, expected_dead = (ref / "out").read_bytes(), (ref / "st" / "dead-letter.jsonl").read_bytes()
    codes = set()
    state, out = fs.path / "st", tmp_path / "out"

    def replayed() -> object:
        return out.read_bytes(), (state / "dead-letter.jsonl").read_bytes()

    for size in SIZES:  # the state directory on the small disk: lock, create, write, commit, close
        clear(fs, size)
        argv = ["replay", *flags, "--state-dir", str(state), "-o", str(out), str(source)]
        codes.add(full_then_room(capsys, fs, argv, replayed, (expected_out, expected_dead)))
    assert codes == {ExitCode.IO, ExitCode.OK}, "the sizes should both fail and fit"
    # Opening a database (which writes its log back) or going on with a full disk.
    clear(fs, "64m")
    assert main(["replay", *flags, "--state-dir", str(state), "-o", str(tmp_path / "o1"), str(source)]) == 0
    fill(fs)
    argv = ["replay", *flags, "--state-dir", str(state), "-o", str(tmp_path / "o2"), str(more)]
    assert full_then_room(capsys, fs, argv, (tmp_path / "o2").read_bytes, (ref / "out2").read_bytes()) == 4
    # The dead-letter file and the output on the small disk.
    for size in ("4k", "8k"):
        clear(fs, size)
        dead, state = fs.path / "dead.jsonl", tmp_path / f"st-dead-{size}"
        argv = ["replay", *flags, "--dead-letter", str(dead), "--state-dir", str(state), "-o",
                str(tmp_path / f"o-{size}"), str(source)]  # fmt: skip
        assert full_then_room(capsys, fs, argv, dead.read_bytes, expected_dead) == 4
        clear(fs, size)
        out = fs.path / "out"
        argv = [
            "replay",
            *flags,
            "--state-dir",
            str(tmp_path / f"st-out-{size}"),
            "-o",
            str(out),
            str(source),
        ]
        assert full_then_room(capsys, fs, argv, out.read_bytes, expected_out) == 4
    # A savepoint and a restore on the small disk.
    saved = json.loads((ref / "sp" / "manifest.json").read_text())
    for size in ("4k", "16k", "64k"):
        clear(fs, size)
        argv = ["savepoint", "--state-dir", str(ref / "st"), "-o", str(fs.path / "sp")]
        full_then_room(
            capsys, fs, argv, lambda: json.loads((fs.path / "sp" / "manifest.json").read_text()), saved
        )
    fields = ("lines", "runs", "now", "retract_misses", "arity", "in_progress")
    restore = ["--backend", backend, "--strategy", BACKENDS[backend]]
    assert main(["restore", str(ref / "sp"), "--state-dir", str(ref / "restored"), *restore]) == 0
    capsys.readouterr()
    reference = json.loads((ref / "restored" / "manifest.json").read_text())
    target = fs.path / "st"

    def restored() -> object:
        manifest = json.loads((target / "manifest.json").read_text())
        return [manifest[field] for field in fields]

    for size in ("4k", "16k", "64k", "160k"):
        clear(fs, size)
        argv = ["restore", str(ref / "sp"), "--state-dir", str(target), *restore]
        full_then_room(capsys, fs, argv, restored, [reference[field] for field in fields])
