"""Damaged, hostile or missing state met by ``replay``: one clear line, exit 3, never a traceback.

The damage is real: bytes flipped in RocksDB's table files, values rewritten inside the
databases with the engines' own APIs (undecodable bytes, the wrong shape, msgpack extension
types, deep nesting, huge declared lengths), a deleted database, a swapped manifest, a FIFO or a
device where the manifest or the snapshot should be.
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

import lmdb
import msgpack
import pytest
from rocksdict import Options, Rdict

from upsertmat.errors import ExitCode

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
NODES_PREFIX = b"m\x05nodes"  # the MAP layout's node map state (impls/state/codec.py)


def stream(start: int, count: int) -> str:
    return "".join(
        json.dumps({"op": "+U", "row": [i % 20, i % 3, f"v{i}"]}) + "\n" for i in range(start, start + count)
    )


def replay(
    tmp_path: Path, backend: str, text: str, *, part: int, strategy: str = "MAP"
) -> subprocess.CompletedProcess[str]:
    source = tmp_path / f"part{part}.jsonl"
    source.write_text(text)
    output = tmp_path / f"out{part}"
    args = [SCRIPT, "replay", "--pk", "0", "--upsert-key", "1", "-q", "--strategy", strategy, "--backend",
            backend, "--state-dir", str(tmp_path / "st"), "-o", str(output), str(source)]  # fmt: skip
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def refused(result: subprocess.CompletedProcess[str], *words: str | Path) -> None:
    assert result.returncode == ExitCode.STATE_DIR, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for word in words:
        assert str(word) in result.stderr, result.stderr


def rewrite_values(tmp_path: Path, backend: str, value: bytes) -> int:
    """Replace every stored MAP node with ``value`` (raw bytes); returns how many."""
    database = tmp_path / "st" / backend / "materializer" / "db"
    count = 0
    if backend == "rocksdb":
        db = Rdict(str(database), options=Options(raw_mode=True))
        try:
            keys = [key for key in db.keys() if isinstance(key, bytes) and key.startswith(NODES_PREFIX)]  # noqa: SIM118
            for key in keys:
                db[key] = value
                count += 1
        finally:
            db.close()
        return count
    env = lmdb.open(str(database), subdir=True, max_dbs=0)
    try:
        with env.begin(write=True) as txn:
            keys = [bytes(key) for key, _ in txn.cursor() if bytes(key).startswith(NODES_PREFIX)]
            for key in keys:
                txn.put(key, value)
                count += 1
    finally:
        env.close()
    return count


HOSTILE_VALUES: dict[str, bytes] = {
    "undecodable": b"\xc1",
    "empty": b"",
    "wrong shape": msgpack.packb([1, 2]),
    "deeply nested": b"\x91" * 5000 + b"\xc0",
    "huge declared array": b"\xdd\xff\xff\xff\xff",
    "ext type 7": msgpack.packb(msgpack.ExtType(7, b"x")),
    "timestamp ext": b"\xd6\xff\x00\x00\x00\x01",
}


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
@pytest.mark.parametrize("kind", list(HOSTILE_VALUES))
def test_a_hostile_stored_value_is_damaged_state(tmp_path: Path, backend: str, kind: str) -> None:
    assert replay(tmp_path, backend, stream(0, 200), part=0).returncode == 0
    assert rewrite_values(tmp_path, backend, HOSTILE_VALUES[kind]) > 0
    result = replay(tmp_path, backend, stream(200, 100), part=1)
    refused(result, "damaged state")


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_a_deleted_database_is_refused_never_reset(tmp_path: Path, backend: str) -> None:
    assert replay(tmp_path, backend, stream(0, 50), part=0).returncode == 0
    shutil.rmtree(tmp_path / "st" / backend)
    refused(replay(tmp_path, backend, stream(50, 10), part=1), "is missing", "refusing to start from empty")


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_an_older_manifest_put_back_is_refused(tmp_path: Path, backend: str) -> None:
    assert replay(tmp_path, backend, stream(0, 50), part=0).returncode == 0
    old = (tmp_path / "st" / "manifest.json").read_bytes()
    assert replay(tmp_path, backend, stream(50, 50), part=1).returncode == 0
    (tmp_path / "st" / "manifest.json").write_bytes(old)
    refused(replay(tmp_path, backend, stream(100, 10), part=2), "manifest", "refusing to go on")


def test_flipped_bytes_in_a_rocksdb_table_file_are_damaged_state(tmp_path: Path) -> None:
    assert replay(tmp_path, "rocksdb", stream(0, 3000), part=0).returncode == 0
    # Opening again recovers the write-ahead log into a table file.
    assert replay(tmp_path, "rocksdb", stream(3000, 10), part=1).returncode == 0
    database = tmp_path / "st" / "rocksdb" / "materializer" / "db"
    tables = sorted(database.glob("*.sst"), key=lambda path: path.stat().st_mtime)
    assert tables, "no table file to damage"
    data = bytearray(tables[-1].read_bytes())
    middle = len(data) // 3
    data[middle : middle + 64] = bytes(byte ^ 0xFF for byte in data[middle : middle + 64])
    tables[-1].write_bytes(bytes(data))
    result = replay(tmp_path, "rocksdb", stream(3010, 3000), part=2)
    refused(result)
    assert "Corruption" in result.stderr or "damaged" in result.stderr


def newest_table(state: Path) -> Path:
    database = state / "rocksdb" / "materializer" / "db"
    tables = sorted(database.glob("*.sst"), key=lambda path: path.stat().st_mtime)
    assert tables, "no table file to damage"
    return tables[-1]


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset : offset + 64] = bytes(byte ^ 0xFF for byte in data[offset : offset + 64])
    path.write_bytes(bytes(data))


def test_a_damaged_table_met_at_open_is_damaged_state(tmp_path: Path) -> None:
    """The first block of the newest table holds the format marker read at open: its checksum
    mismatch is damaged state (exit 3) for every command, never an internal error."""
    assert replay(tmp_path, "rocksdb", stream(0, 3000), part=0).returncode == 0
    assert replay(tmp_path, "rocksdb", stream(3000, 10), part=1).returncode == 0  # the log into a table
    flip(newest_table(tmp_path / "st"), 0)
    refused(replay(tmp_path, "rocksdb", stream(3010, 10), part=2), "damaged state", "Corruption", "000")
    args = [SCRIPT, "savepoint", "--state-dir", str(tmp_path / "st"), "-o", str(tmp_path / "sp")]
    saved = subprocess.run(args, capture_output=True, text=True, timeout=120)
    refused(saved, "damaged state", "Corruption")
    assert not (tmp_path / "sp").exists()


def test_a_damaged_block_met_by_a_scan_ends_it_with_an_error_never_short(tmp_path: Path) -> None:
    """A RocksDB iterator that meets a block whose checksum does not match just stops being
    valid: a scan that took that for the end would export fewer keys in silence. Damage at
    any place of the table is refused, or (when no read meets it) changes nothing."""
    many = "".join(json.dumps({"op": "+I", "row": [i, i % 7, "x" * 40]}) + "\n" for i in range(20000))
    assert replay(tmp_path, "rocksdb", many, part=0).returncode == 0
    assert replay(tmp_path, "rocksdb", stream(30000, 10), part=1).returncode == 0
    reference = tmp_path / "reference-st"
    shutil.copytree(tmp_path / "st", reference)
    args = [SCRIPT, "savepoint", "--state-dir", str(reference), "-o", str(tmp_path / "ref-sp")]
    whole = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert whole.returncode == 0, whole.stderr
    keys = json.loads((tmp_path / "ref-sp" / "manifest.json").read_text())
    refusals = 0
    database = reference / "rocksdb" / "materializer" / "db"
    largest = max(database.glob("*.sst"), key=lambda path: path.stat().st_size)  # the 20,000 keys
    size = largest.stat().st_size
    for number, fraction in enumerate((0.3, 0.6, 0.9)):
        damaged = tmp_path / f"st{number}"
        shutil.copytree(reference, damaged)
        table = damaged / largest.relative_to(reference)
        flip(table, int(size * fraction))
        target = tmp_path / f"sp{number}"
        saved = subprocess.run([SCRIPT, "savepoint", "--state-dir", str(damaged), "-o", str(target)],
                               capture_output=True, text=True, timeout=120)  # fmt: skip
        if saved.returncode == 0:
            assert json.loads((target / "manifest.json").read_text())["files"] == keys["files"], fraction
        else:
            refused(saved, "damaged state", "Corruption")
            refusals += 1
    assert refusals, "no damage was met: the test proves nothing"


Special = Callable[[Path], None]
SPECIALS: dict[str, Special] = {
    "a FIFO": lambda path: os.mkfifo(path),
    "a symlink to /dev/zero": lambda path: path.symlink_to("/dev/zero"),
}


@pytest.mark.parametrize("special", list(SPECIALS))
@pytest.mark.parametrize("target", ["manifest.json", "snapshot"])
def test_a_special_file_in_place_of_state_is_refused_at_once(
    tmp_path: Path, special: str, target: str
) -> None:
    assert replay(tmp_path, "heap", stream(0, 20), part=0).returncode == 0
    if target == "snapshot":
        path = next((tmp_path / "st").glob("snapshot-*.msgpack"))
    else:
        path = tmp_path / "st" / target
    path.unlink()
    SPECIALS[special](path)
    refused(replay(tmp_path, "heap", stream(20, 5), part=1), "not a regular file", str(path))


def test_a_deeply_nested_manifest_is_refused(tmp_path: Path) -> None:
    assert replay(tmp_path, "heap", stream(0, 20), part=0).returncode == 0
    (tmp_path / "st" / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    refused(replay(tmp_path, "heap", stream(20, 5), part=1), "nested too deeply")


def savepoint(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    args = [SCRIPT, "savepoint", "--state-dir", str(tmp_path / "st"), "-o", str(tmp_path / "sp")]
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "cell",
    [b"\xc4\x01x", b"\xd6\xff\x00\x00\x00\x01", b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00"],
    ids=["msgpack bin", "timestamp ext", "NaN"],
)
@pytest.mark.parametrize("command", ["replay", "savepoint"])
def test_a_heap_snapshot_cell_json_cannot_carry_is_refused(tmp_path: Path, cell: bytes, command: str) -> None:
    """The cell is re-checksummed in the manifest: only the validation of what it decodes to can catch it."""
    assert replay(tmp_path, "heap", stream(0, 5), part=0).returncode == 0
    snapshot = next((tmp_path / "st").glob("snapshot-*.msgpack"))
    data = snapshot.read_bytes()
    damaged = data.replace(b"\xa2v0", cell, 1)  # the payload "v0" of the first row
    assert damaged != data
    snapshot.write_bytes(damaged)
    manifest = json.loads((tmp_path / "st" / "manifest.json").read_text())
    manifest["snapshot_sha256"] = hashlib.sha256(damaged).hexdigest()
    (tmp_path / "st" / "manifest.json").write_text(json.dumps(manifest))
    result = replay(tmp_path, "heap", stream(5, 5), part=1) if command == "replay" else savepoint(tmp_path)
    refused(result, "damaged snapshot", "JSON cannot carry")


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
@pytest.mark.parametrize("kind", ["undecodable", "wrong shape", "timestamp ext"])
def test_savepoint_of_a_hostile_byte_state_is_refused(tmp_path: Path, backend: str, kind: str) -> None:
    assert replay(tmp_path, backend, stream(0, 100), part=0).returncode == 0
    assert rewrite_values(tmp_path, backend, HOSTILE_VALUES[kind]) > 0
    refused(savepoint(tmp_path), "damaged state", tmp_path / "st")  # the refusal names the directory
    assert not (tmp_path / "sp").exists() or not any((tmp_path / "sp").iterdir())


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_a_timestamp_inside_a_well_shaped_row_is_damaged_state(tmp_path: Path, backend: str) -> None:
    """The layout is intact, but a row holds a msgpack timestamp: found when it reaches the output."""
    assert replay(tmp_path, backend, stream(0, 60), part=0, strategy="VALUE").returncode == 0
    database = tmp_path / "st" / backend / "materializer" / "db"
    prefix = b"v\x05value"

    def poison(data: bytes) -> bytes:
        rows, stamps, matches = msgpack.unpackb(data, raw=False)
        rows = [[*row[:-1], msgpack.Timestamp(1)] for row in rows]
        return msgpack.packb([rows, stamps, matches], use_bin_type=True)

    if backend == "rocksdb":
        db = Rdict(str(database), options=Options(raw_mode=True))
        try:
            for key in [key for key in db.keys() if isinstance(key, bytes) and key.startswith(prefix)]:  # noqa: SIM118
                stored = db[key]
                assert isinstance(stored, bytes)
                db[key] = poison(stored)
        finally:
            db.close()
    else:
        env = lmdb.open(str(database), subdir=True, max_dbs=0)
        try:
            with env.begin(write=True) as txn:
                for key, data in list(txn.cursor()):
                    if bytes(key).startswith(prefix):
                        txn.put(bytes(key), poison(bytes(data)))
        finally:
            env.close()
    # Retract the last rows of key 0: a rollback +U (rule 9) emits a poisoned row.
    retractions = "".join(json.dumps({"op": "-U", "row": [0, u, "x"]}) + "\n" for u in (0, 1, 2))
    refused(
        replay(tmp_path, backend, retractions, part=1, strategy="VALUE"), "damaged state", "JSON cannot carry"
    )


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        # CURRENT names a MANIFEST that is gone (exit 4, "free space and run again" before).
        ("current", ["a file it lists is missing", "MANIFEST-999999"]),
        # A table file cut short: RocksDB's status is two lines ("... may be corrupted."), said as one.
        ("truncated table", ["Sst file size mismatch", "may be corrupted"]),
    ],
)
@pytest.mark.parametrize("command", ["replay", "savepoint"])
def test_a_rocksdb_database_missing_or_cut_files_is_damaged_state_in_one_line(
    tmp_path: Path, damage: str, words: list[str], command: str
) -> None:
    assert replay(tmp_path, "rocksdb", stream(0, 400), part=1).returncode == 0
    database = tmp_path / "st" / "rocksdb" / "materializer" / "db"
    if damage == "current":
        (database / "CURRENT").write_text("MANIFEST-999999\n")
    else:
        for table in database.glob("*.sst"):
            os.truncate(table, 100)
    if command == "replay":
        result = replay(tmp_path, "rocksdb", stream(400, 10), part=2)
    else:
        args = [SCRIPT, "savepoint", "--state-dir", str(tmp_path / "st"), "-o", str(tmp_path / "sp")]
        result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    refused(result, "damaged state", database, *words)


def test_a_heap_snapshot_stamp_beyond_what_state_holds_is_refused(tmp_path: Path) -> None:
    """A stamp of 2**63 ms: a struct.error (exit 70) where a timer was keyed by it, before."""
    assert replay(tmp_path, "heap", stream(0, 5), part=0).returncode == 0
    snapshot = next((tmp_path / "st").glob("snapshot-*.msgpack"))
    objects = list(msgpack.Unpacker(io.BytesIO(snapshot.read_bytes()), raw=False))
    objects[1][2][0] = 2**63  # the first key's first stamp
    damaged = b"".join(msgpack.packb(item, use_bin_type=True) for item in objects)
    snapshot.write_bytes(damaged)
    manifest = json.loads((tmp_path / "st" / "manifest.json").read_text())
    manifest["snapshot_sha256"] = hashlib.sha256(damaged).hexdigest()
    (tmp_path / "st" / "manifest.json").write_text(json.dumps(manifest))
    refused(replay(tmp_path, "heap", stream(5, 5), part=1), "damaged snapshot", "magnitude at most")
