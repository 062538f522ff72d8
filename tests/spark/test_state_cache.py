"""The Spark state's machine-local copy (LMDB, ``writemap``) grows its map as it fills: within one
process, while a read is open (the write is left out, never half done), and when another process
grew it; a copy written before the operating system last booted is discarded. Real LMDB
environments on disk; the second process is a real one."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from upsertmat.impls.state.spark_cache import BOOT_FILE, LocalStateCache, boot_id, namespace

SMALL_MAP = 1 << 20
"""1 MiB: a copy of a few MB must grow it several times."""


def entries(count: int, tag: bytes = b"") -> dict[bytes, bytes]:
    return {tag + index.to_bytes(4, "big"): os.urandom(200) for index in range(count)}


def read_back(cache: LocalStateCache, space: bytes, token: bytes) -> dict[bytes, bytes] | None:
    reader = cache.begin(space, token)
    if reader is None:
        return None
    try:
        return dict(cache.items(reader, space))
    finally:
        cache.end(reader)


def one_read_open(tmp_path: Path, group: bytes, count: int) -> tuple[LocalStateCache, bytes, Any]:
    """A copy with a small map holding ``count`` entries of ``group``, and a read of them open."""
    cache = LocalStateCache(tmp_path / "copy", map_size=SMALL_MAP)
    space = namespace("query", "state", group)
    cache.replace(space, group, entries(count))
    reader = cache.begin(space, group)
    assert reader is not None
    return cache, space, reader


def test_the_map_doubles_as_the_copy_fills_and_the_file_stays_its_size(tmp_path: Path) -> None:
    cache = LocalStateCache(tmp_path / "copy", map_size=SMALL_MAP)
    written: dict[bytes, dict[bytes, bytes]] = {}
    for group in range(8):  # 8 x 4,000 x ~210 B: ~7 MB in a map opened at 1 MiB
        space = namespace("query", "state", bytes([group]))
        written[space] = entries(4_000)
        cache.replace(space, b"token", written[space])
    assert cache.enabled
    assert cache.resizes >= 3
    for space, stored in written.items():
        assert read_back(cache, space, b"token") == stored
    # A written map is a file as long as the map: it grew with the copy, not to the largest map.
    assert (tmp_path / "copy" / "data.mdb").stat().st_size <= 64 << 20


def test_a_write_while_a_read_is_open_leaves_a_full_map_and_the_copy_as_they_were(tmp_path: Path) -> None:
    cache, small, reader = one_read_open(tmp_path, b"small", 10)
    big = namespace("query", "state", b"big")
    cache.replace(big, b"two", entries(20_000))  # ~4 MB: the map is full, and it cannot move now
    assert cache.enabled and cache.resizes == 0
    assert read_back(cache, big, b"two") is None  # left out whole: the next batch rebuilds it
    assert len(dict(cache.items(reader, small))) == 10
    cache.end(reader)
    rebuilt = entries(20_000)
    cache.replace(big, b"two", rebuilt)  # no read open: grown and written
    assert cache.resizes >= 1
    assert read_back(cache, big, b"two") == rebuilt


GROW_IN_ANOTHER_PROCESS = """
import sys
from pathlib import Path
from upsertmat.impls.state.spark_cache import BOOT_FILE, LocalStateCache, boot_id, namespace
cache = LocalStateCache(Path(sys.argv[1]), map_size=1 << 20)
space = namespace("query", "state", b"theirs")
cache.replace(space, b"theirs", {index.to_bytes(4, "big"): bytes(200) for index in range(30_000)})
assert cache.enabled and cache.resizes >= 2, (cache.enabled, cache.resizes)
"""


def test_a_map_another_process_grew_is_taken_on(tmp_path: Path) -> None:
    cache = LocalStateCache(tmp_path / "copy", map_size=SMALL_MAP)
    ours = namespace("query", "state", b"ours")
    mine = entries(100)
    cache.replace(ours, b"ours", mine)
    subprocess.run([sys.executable, "-c", GROW_IN_ANOTHER_PROCESS, str(tmp_path / "copy")], check=True)
    theirs = namespace("query", "state", b"theirs")
    found = read_back(cache, theirs, b"theirs")  # the data now lies beyond this process's map
    assert found is not None and len(found) == 30_000
    assert found[(29_999).to_bytes(4, "big")] == bytes(200)
    cache.update(ours, b"ours", b"ours2", {b"new": b"value"})
    assert read_back(cache, ours, b"ours2") == {**mine, b"new": b"value"}
    assert cache.enabled


def test_a_map_another_process_grew_while_a_read_is_open_is_taken_on_after_it(tmp_path: Path) -> None:
    cache, ours, reader = one_read_open(tmp_path, b"ours", 100)
    subprocess.run([sys.executable, "-c", GROW_IN_ANOTHER_PROCESS, str(tmp_path / "copy")], check=True)
    theirs = namespace("query", "state", b"theirs")
    assert cache.begin(theirs, b"theirs") is None  # beyond this process's map, which cannot move now
    cache.update(ours, b"ours", b"ours2", {b"new": b"value"})  # left out: the copy stays at "ours"
    assert len(dict(cache.items(reader, ours))) == 100
    cache.end(reader)
    found = read_back(cache, theirs, b"theirs")
    assert found is not None and len(found) == 30_000
    assert read_back(cache, ours, b"ours2") is None and read_back(cache, ours, b"ours") is not None
    assert cache.enabled


def test_a_copy_written_before_the_last_boot_is_discarded_when_first_opened(tmp_path: Path) -> None:
    for name in ("same-boot", "rebooted"):
        subprocess.run([sys.executable, "-c", GROW_IN_ANOTHER_PROCESS, str(tmp_path / name)], check=True)
        assert (tmp_path / name / BOOT_FILE).read_text().strip() == boot_id()
    # What an operating-system crash and reboot leave on disk: the copy, written by another boot.
    (tmp_path / "rebooted" / BOOT_FILE).write_text("a boot before this one\n")
    theirs = namespace("query", "state", b"theirs")
    kept = read_back(LocalStateCache(tmp_path / "same-boot"), theirs, b"theirs")
    assert kept is not None and len(kept) == 30_000
    rebooted = LocalStateCache(tmp_path / "rebooted")
    assert read_back(rebooted, theirs, b"theirs") is None  # gone: the bucket is rebuilt from Spark
    assert rebooted.enabled
    assert (tmp_path / "rebooted" / BOOT_FILE).read_text().strip() == boot_id()


def test_a_read_a_failed_task_dropped_without_ending_it_does_not_hold_the_map_still(tmp_path: Path) -> None:
    cache, _, reader = one_read_open(tmp_path, b"small", 10)
    del reader  # the task raised between its read and its flush: nothing ends the transaction
    gc.collect()
    big = namespace("query", "state", b"big")
    written = entries(20_000)
    cache.replace(big, b"two", written)
    assert cache.resizes >= 1
    assert read_back(cache, big, b"two") == written
