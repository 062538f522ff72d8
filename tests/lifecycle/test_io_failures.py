"""An I/O error at every file-system operation of every command: one line, exit 4, and the
same command again ends exactly as an uninterrupted run.

A device error (EIO) cannot be made on a tmpfs (``test_storage_failures.py`` fills one for
real: ENOSPC), so here an injector makes the k-th file-system operation of the process fail
with EIO — opening, reading, writing, flushing, truncating or closing a file (the objects
``open`` and ``os.fdopen`` return are wrapped), and ``os.open``, ``fsync``, ``replace``,
``rename``, ``truncate``, ``ftruncate``, ``write``, ``read``, ``listdir``, ``unlink``,
``mkdir``, ``rmdir``, ``posix_fallocate`` — for k = 1, 2, ... until a run meets no injected
failure. The storage engines' own I/O (RocksDB's and LMDB's C code) is not reached by it; their
errors are classified from the engines' status (``classify``) and met for real on the tmpfs.

Each command — ``replay`` on a state directory with bad lines going to the dead-letter file,
``savepoint``, ``restore``, ``inspect`` — must then exit 4 with one line naming the file
(or 0 when the failure could be ignored, as a lock file's pid), never a traceback; the same
command again must exit 0 with exactly the reference result.
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from upsertmat.cli import main
from upsertmat.errors import ExitCode

from .support import UPSERT_KEY, mixed_stream

OS_CALLS = ("open", "fsync", "replace", "rename", "truncate", "ftruncate", "write", "read", "listdir",
            "unlink", "mkdir", "rmdir", "posix_fallocate")  # fmt: skip
FILE_CALLS = frozenset(
    {"read", "readline", "readinto", "write", "flush", "truncate", "seek", "close", "fileno"}
)


class Injector:
    """Counts file-system operations; the ``at``-th one raises OSError(EIO) (0: none does)."""

    def __init__(self, at: int) -> None:
        self.at = at
        self.count = 0
        self.hit: str | None = None

    def tick(self, what: str) -> None:
        self.count += 1
        if self.count == self.at:
            self.hit = what
            raise OSError(errno.EIO, os.strerror(errno.EIO))


class FailingFile:
    """A file object whose I/O methods tick the injector first."""

    def __init__(self, inner: Any, injector: Injector) -> None:
        self._inner = inner
        self._injector = injector

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name not in FILE_CALLS or not callable(attribute):
            return attribute
        injector = self._injector

        def call(*args: Any, **kwargs: Any) -> Any:
            injector.tick(f"file.{name}")
            return attribute(*args, **kwargs)

        return call

    def __iter__(self) -> Iterator[Any]:
        return iter(self.readline, self._inner.read(0))

    def __enter__(self) -> FailingFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def inject(monkeypatch: pytest.MonkeyPatch, injector: Injector) -> None:
    def wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            injector.tick(name)
            return original(*args, **kwargs)

        return call

    for name in OS_CALLS:
        monkeypatch.setattr(os, name, wrap(f"os.{name}", getattr(os, name)))
    real_open, real_fdopen = builtins.open, os.fdopen

    def opened(*args: Any, **kwargs: Any) -> Any:
        injector.tick("open")
        return FailingFile(real_open(*args, **kwargs), injector)

    def fdopened(*args: Any, **kwargs: Any) -> Any:
        injector.tick("os.fdopen")
        return FailingFile(real_fdopen(*args, **kwargs), injector)

    monkeypatch.setattr(builtins, "open", opened)
    monkeypatch.setattr(io, "open", opened)
    monkeypatch.setattr(os, "fdopen", fdopened)


def source_text() -> str:
    lines = [json.dumps({"op": change.kind.value, "row": list(change.row)}) + "\n"
             for change in mixed_stream(3, 40, UPSERT_KEY)]  # fmt: skip
    lines[7] = "not json\n"  # a dead letter
    lines.insert(20, json.dumps({"time": 5}) + "\n")
    return "".join(lines)


Run = Callable[[Path], list[str]]


def sweep(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    argv: Run,
    result: Callable[[Path], object],
    named: Path | None = None,
    prepare: Callable[[Path], None] | None = None,
) -> int:
    """Run ``argv(directory)`` with the k-th operation failing, for every k, each in a fresh
    directory under ``tmp_path`` (set up by ``prepare(directory)`` first, without failures);
    check the failure (its line names a path under ``named``, default ``tmp_path``) and the
    rerun. Returns how many operations a run makes."""
    reference = tmp_path / "reference"
    reference.mkdir(parents=True)
    if prepare is not None:
        prepare(reference)
    assert main(argv(reference)) == ExitCode.OK, capsys.readouterr().err
    capsys.readouterr()
    expected = result(reference)
    at = 1
    while True:
        directory = tmp_path / f"at{at}"
        directory.mkdir()
        if prepare is not None:
            prepare(directory)
            capsys.readouterr()
        injector = Injector(at)
        with monkeypatch.context() as patch:
            inject(patch, injector)
            code = main(argv(directory))
        err = capsys.readouterr().err
        where = f"failure at operation {at} ({injector.hit})"
        assert "Traceback" not in err and "internal error" not in err, f"{where}: {err}"
        if injector.hit is None:
            assert code == ExitCode.OK, err
            return at - 1
        assert code in (ExitCode.OK, ExitCode.IO), f"{where}: exit {code}: {err}"
        if code == ExitCode.IO:  # else the failure was one to ignore (the pid in a lock file)
            last = err.strip().splitlines()[-1]
            assert "Input/output error" in last and str(named or tmp_path) in last, f"{where}: {err}"
            again = main(argv(directory))
            err = capsys.readouterr().err
            assert again == ExitCode.OK, f"{where}, then again: {err}"
        assert result(directory) == expected, where
        shutil.rmtree(directory)  # an LMDB state reserves 16 MB: hundreds of runs filled CI's disk
        at += 1


BACKENDS = [("heap", "MAP"), ("rocksdb", "MAP"), ("lmdb", "SORTED")]


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "strategy"), BACKENDS)
def test_an_io_error_anywhere_in_a_replay_is_one_line_and_the_rerun_is_exact(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    strategy: str,
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(source_text())

    def argv(directory: Path) -> list[str]:
        return ["replay", "--pk", "0", "--upsert-key", "1", "-q", "--backend", backend,
                "--strategy", strategy, "--on-error", "skip", "--checkpoint-every", "9",
                "--state-dir", str(directory / "st"), "-o", str(directory / "out.jsonl"),
                str(source)]  # fmt: skip

    def result(directory: Path) -> object:
        return (directory / "out.jsonl").read_bytes(), (directory / "st" / "dead-letter.jsonl").read_bytes()

    assert sweep(capsys, monkeypatch, tmp_path, argv, result) > 20


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "strategy"), [("heap", "MAP"), ("lmdb", "SORTED")])
def test_an_io_error_anywhere_in_a_resumed_replay_is_one_line_and_the_rerun_is_exact(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    strategy: str,
) -> None:
    """The run resumes one that stopped at a bad line (since fixed): skipping the applied
    bytes, truncating the outputs, going on. (Those steps are the replay's own I/O, the same
    for every byte backend: heap and one byte backend suffice.)"""
    fixed = source_text()
    lines = fixed.splitlines(keepends=True)
    lines[25] = '{"op": "+X", "row": [1]}\n'
    bad = "".join(lines)

    def argv(directory: Path) -> list[str]:
        return ["replay", "--pk", "0", "--upsert-key", "1", "-q", "--backend", backend,
                "--strategy", strategy, "--on-error", "skip", "--checkpoint-every", "9",
                "--state-dir", str(directory / "st"), "-o", str(directory / "out.jsonl"),
                str(directory / "in.jsonl")]  # fmt: skip

    def prepare(directory: Path) -> None:
        (directory / "in.jsonl").write_text(bad)
        stopped = [*argv(directory)]
        stopped.remove("skip")
        stopped.remove("--on-error")
        assert main(stopped) == ExitCode.BAD_INPUT
        (directory / "in.jsonl").write_text(fixed)

    def result(directory: Path) -> object:
        return (directory / "out.jsonl").read_bytes(), (directory / "st" / "dead-letter.jsonl").read_bytes()

    assert sweep(capsys, monkeypatch, tmp_path, argv, result, prepare=prepare) > 10


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "strategy"), BACKENDS)
def test_an_io_error_anywhere_in_savepoint_restore_and_inspect_is_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
    strategy: str,
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(source_text())
    state, savepoint = tmp_path / "st", tmp_path / "sp"
    flags = ["--backend", backend, "--strategy", strategy]
    assert main(["replay", "--pk", "0", "--upsert-key", "1", "-q", *flags, "--on-error", "skip",
                 "--state-dir", str(state), "-o", str(tmp_path / "out.jsonl"), str(source)]) == 0  # fmt: skip
    assert main(["savepoint", "--state-dir", str(state), "-o", str(savepoint)]) == 0
    capsys.readouterr()

    def manifest(path: Path) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((path / "manifest.json").read_text())
        return data

    def saved(directory: Path) -> object:
        return manifest(directory / "sp")

    def restored(directory: Path) -> object:
        unique = ("state_id", "generation", "snapshot", "snapshot_sha256")
        return {key: value for key, value in manifest(directory / "st").items() if key not in unique}

    def save(directory: Path) -> list[str]:
        return ["savepoint", "--state-dir", str(state), "-o", str(directory / "sp")]

    def restore(directory: Path) -> list[str]:
        return ["restore", str(savepoint), "--state-dir", str(directory / "st"), *flags]

    sweep(capsys, monkeypatch, tmp_path / "save", save, saved, tmp_path)
    sweep(capsys, monkeypatch, tmp_path / "restore", restore, restored, tmp_path)
    sweep(
        capsys,
        monkeypatch,
        tmp_path / "inspect",
        lambda d: ["inspect", str(savepoint)],
        lambda d: None,
        tmp_path,
    )
