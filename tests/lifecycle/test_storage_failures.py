"""A full disk, for real: a size-limited tmpfs under the state directory (or the output).

Every backend must report it in one clear line naming the path (exit 4, no traceback), leave
the state directory at its last commit, and, once the file system has room again (a remount
with a larger size), the same command must finish the run with exactly the output of an
uninterrupted run. Needs root and a kernel that lets this process mount tmpfs; skipped with
the reason otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

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
