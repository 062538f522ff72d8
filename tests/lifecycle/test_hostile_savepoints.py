"""Savepoints are read as carefully as state directories (``inspect``, ``restore``).

Special files in place of the manifest or a data file (a FIFO, a symlink to ``/dev/zero``)
are refused at once, never read (a hang, or a loop reading a device to its end); a manifest
nested 100,000 deep is damaged JSON, not a RecursionError; every field is checked by the one
field checker, so ``inspect`` refuses exactly what ``restore`` would; every refusal is one
line naming the path, exit 3. The state directory's manifest is checked the same way (a run
that starts after the position). Runs are real processes with a timeout, so a hang fails.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest

from upsertmat.errors import ExitCode

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
SOURCE = "".join(json.dumps({"op": "+I", "row": [i, i % 3, f"v{i}"]}) + "\n" for i in range(40))


def upsertmat(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *map(str, argv)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def taken(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A savepoint of a finished replay (MAP on rocksdb, upsert key)."""
    root = tmp_path_factory.mktemp("taken")
    (root / "in.jsonl").write_text(SOURCE)
    flags = ["--pk", "0", "--upsert-key", "1", "--backend", "rocksdb", "--strategy", "MAP"]
    replayed = upsertmat("replay", *flags, "--state-dir", root / "st", "-o", root / "out", root / "in.jsonl")
    assert replayed.returncode == 0, replayed.stderr
    saved = upsertmat("savepoint", "--state-dir", root / "st", "-o", root / "sp")
    assert saved.returncode == 0, saved.stderr
    return root / "sp"


def copy(taken: Path, tmp_path: Path) -> Path:
    savepoint = tmp_path / "sp"
    shutil.copytree(taken, savepoint)
    return savepoint


def refused(result: subprocess.CompletedProcess[str], *words: str | Path) -> None:
    assert result.returncode == ExitCode.STATE_DIR, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert str(word) in result.stderr, result.stderr


def both_refuse(savepoint: Path, tmp_path: Path, *words: str | Path) -> None:
    """``inspect`` refuses with exactly the line ``restore`` refuses with; the refused restore
    leaves nothing behind (the directory it would have created does not exist)."""
    inspected = upsertmat("inspect", savepoint)
    refused(inspected, *words)
    restored = upsertmat("restore", savepoint, "--state-dir", tmp_path / "restored", "--backend", "rocksdb")
    refused(restored, *words)
    assert inspected.stderr.partition(": ")[2] == restored.stderr.partition(": ")[2]
    assert not (tmp_path / "restored").exists()


SPECIALS: dict[str, Callable[[Path], None]] = {
    "a FIFO": lambda path: os.mkfifo(path),
    "a symlink to /dev/zero": lambda path: path.symlink_to("/dev/zero"),
}


@pytest.mark.parametrize("special", list(SPECIALS))
@pytest.mark.parametrize("target", ["manifest.json", "a data file"])
def test_a_special_file_in_a_savepoint_is_refused_at_once(
    taken: Path, tmp_path: Path, special: str, target: str
) -> None:
    savepoint = copy(taken, tmp_path)
    path = savepoint / "manifest.json" if target == "manifest.json" else sorted(savepoint.glob("kg-*"))[0]
    path.unlink()
    SPECIALS[special](path)
    both_refuse(savepoint, tmp_path, path, "is not a regular file")


def test_a_manifest_nested_too_deeply_is_damaged_not_a_crash(taken: Path, tmp_path: Path) -> None:
    savepoint = copy(taken, tmp_path)
    (savepoint / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    both_refuse(savepoint, tmp_path, savepoint / "manifest.json", "nested too deeply")


def edit(savepoint: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = savepoint / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))


EDITS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "lines -1": (lambda m: m["extra"].update(lines=-1), "'lines' must be a non-negative integer"),
    "arity 'x'": (lambda m: m["extra"].update(arity="x"), "'arity' must be a positive integer or null"),
    "arity 0": (lambda m: m["extra"].update(arity=0), "'arity' must be a positive integer or null"),
    "runs not a list": (lambda m: m["extra"].update(runs={}), "'runs' must be a list"),
    "a run's lines -1": (lambda m: m["extra"]["runs"][0].update(lines=-1), "'lines' must be a non-negative"),
    "equalizer os:system": (
        lambda m: m["equalizer"].update(spec="os:system"),
        "unknown equalizer 'os:system'",
    ),
    "another fingerprint": (lambda m: m["equalizer"].update(fingerprint="0" * 16), "refusing to mix them"),
    "pk twice": (lambda m: m.update(pk=[0, 0]), "names a column twice"),
    "a negative clock": (lambda m: m.update(now=-1), "'now' must be a non-negative integer"),
    # Integers beyond what state holds (struct.error, MemoryError or a hang before, exit 70):
    "ttl 10**30": (lambda m: m["ttl"].update(ttl_ms=10**30), "'ttl_ms' must be at most 4611686018427387903"),
    "a clock of 10**30": (lambda m: m.update(now=10**30), "'now' must be at most 4611686018427387903"),
    "max parallelism 10**30": (
        lambda m: m.update(max_parallelism=10**30),
        "'max_parallelism' must be at most 32768",
    ),
    "lines 2**63": (lambda m: m["extra"].update(lines=2**63), "'lines' must be at most 9223372036854775807"),
    "arity 10**30": (
        lambda m: m["extra"].update(arity=10**30),
        "'arity' must be at most 9223372036854775807",
    ),
    "arity 1": (lambda m: m["extra"].update(arity=1), "'arity' of 1 leaves out key column 1"),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_inspect_verifies_exactly_what_restore_requires(taken: Path, tmp_path: Path, name: str) -> None:
    savepoint = copy(taken, tmp_path)
    change, message = EDITS[name]
    edit(savepoint, change)
    both_refuse(savepoint, tmp_path, savepoint / "manifest.json", message)


def test_an_arity_the_rows_do_not_have_is_refused(taken: Path, tmp_path: Path) -> None:
    """The restored directory would refuse every row as damaged state (before: accepted by both)."""
    savepoint = copy(taken, tmp_path)
    edit(savepoint, lambda m: m["extra"].update(arity=7))
    both_refuse(
        savepoint, tmp_path, savepoint / "kg-", "a row has 3 column(s) but the manifest's extra.arity is 7"
    )


def test_a_stamp_beyond_what_state_holds_is_refused(taken: Path, tmp_path: Path) -> None:
    savepoint = copy(taken, tmp_path)
    path = sorted(savepoint.glob("kg-*"))[0]
    objects = list(msgpack.Unpacker(io.BytesIO(path.read_bytes()), raw=False))
    objects[1][1][0][1] = 2**63  # the first element's stamp (msgpack holds no larger integer)
    data = b"".join(msgpack.packb(item, use_bin_type=True) for item in objects)
    path.write_bytes(data)

    def listed(manifest: dict[str, Any]) -> None:
        (entry,) = [entry for entry in manifest["files"] if entry["name"] == path.name]
        entry.update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())

    edit(savepoint, listed)
    both_refuse(
        savepoint,
        tmp_path,
        path,
        "an element's stamp is not an integer of magnitude at most 4611686018427387903",
    )


def test_a_savepoint_that_inspect_accepts_restores_and_replays_on(taken: Path, tmp_path: Path) -> None:
    """The positive side: extra fields this upsertmat does not know are kept, not refused."""
    savepoint = copy(taken, tmp_path)
    edit(savepoint, lambda m: m["extra"].update(note="kept as it is"))
    assert json.loads(upsertmat("inspect", savepoint).stdout)["verified"] is True
    restored = upsertmat("restore", savepoint, "--state-dir", tmp_path / "st", "--backend", "lmdb")
    assert restored.returncode == 0, restored.stderr
    assert "replay continues at stream line 40" in restored.stderr


def test_a_state_manifest_whose_run_starts_after_the_position_is_refused(taken: Path, tmp_path: Path) -> None:
    """Such a manifest would be saved into a savepoint with a negative run length."""
    state = tmp_path / "st"
    shutil.copytree(taken.parent / "st", state)
    manifest = json.loads((state / "manifest.json").read_text())
    (state / "manifest.json").write_text(json.dumps({**manifest, "in_progress": True, "run_start": 41}))
    result = upsertmat("savepoint", "--state-dir", state, "-o", tmp_path / "sp")
    refused(result, state / "manifest.json", "'run_start' (41) is beyond 'lines' (40)")
    assert not (tmp_path / "sp").exists()


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_a_restore_refused_by_a_database_without_manifest_removes_nothing(
    taken: Path, tmp_path: Path, backend: str
) -> None:
    """A directory whose database holds committed state but whose manifest is gone (lost, or a
    restore killed between its database commit and its manifest) is refused, and the refusal
    leaves the database as it found it: it may be all that is left of someone's state."""
    target = tmp_path / "st"
    first = upsertmat("restore", taken, "--state-dir", target, "--backend", backend, "--strategy", "MAP")
    assert first.returncode == 0, first.stderr
    manifest = (target / "manifest.json").read_bytes()
    (target / "manifest.json").unlink()
    for _ in range(2):
        again = upsertmat("restore", taken, "--state-dir", target, "--backend", backend, "--strategy", "MAP")
        refused(again, target, "manifest", "remove the directory")
    (target / "manifest.json").write_bytes(manifest)  # the state is all there still
    saved = upsertmat("savepoint", "--state-dir", target, "-o", tmp_path / "again")
    assert saved.returncode == 0, saved.stderr
    summaries = [json.loads(upsertmat("inspect", path).stdout) for path in (taken, tmp_path / "again")]
    assert [(s["keys"], s["elements"]) for s in summaries] == [(40, 40)] * 2
