"""The Spark state's machine-local copy alone, at table size: what a micro-batch's reads and writes
of it cost as the copy grows.

``python tools/state_copy_bench.py --entries 10000000`` fills a
:class:`~upsertmat.impls.state.spark_cache.LocalStateCache` in a temporary directory with
``--entries`` entries spread over ``--groups`` grouping keys (256: the pipeline's default key
buckets; keys and 60-byte values shaped like the backend's), then runs ``--batches`` batches of
``--changes`` random keys as the backend does per grouping key: one read transaction getting each
touched key, then one compare-and-set update of them with new values. It prints one JSON object
per batch (the seconds of the reads and of the writes, summed over the grouping keys) and one
at the end (the data file's apparent size, the map resizes). It measures the build that runs it:
run it with another virtualenv's Python for an older build (docs/benchmarks.md, "The local
copy's write transactions"). One process, so the figures are per batch for one worker; nothing
but the temporary directory is touched, and it is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from pathlib import Path

from upsertmat.impls.state.spark_cache import LocalStateCache, namespace

VALUE_BYTES = 60


def storage_key(key: int) -> bytes:
    """A storage key of the backend's shape (a msgpack array prefix, then the sink key)."""
    return b"\x92\xa1k" + key.to_bytes(8, "big")


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run the bench in a temporary directory, remove it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000_000, help="entries in the copy")
    parser.add_argument("--groups", type=int, default=256, help="grouping keys (key buckets)")
    parser.add_argument("--changes", type=int, default=100_000, help="random keys per batch")
    parser.add_argument("--batches", type=int, default=8, help="measured batches")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    for option in ("entries", "groups", "changes", "batches"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be >= 1")
    directory = Path(tempfile.mkdtemp(prefix="upsertmat-copy-bench-"))
    try:
        run(directory / "copy", args.entries, args.groups, args.changes, args.batches, args.seed)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def run(path: Path, entries: int, groups: int, changes: int, batches: int, seed: int) -> None:
    """Fill the copy at ``path``, run the batches, print one JSON object per line (see the module)."""
    cache = LocalStateCache(path)
    spaces = [namespace("bench", "state", group.to_bytes(4, "big")) for group in range(groups)]
    tokens = [b"start"] * groups
    value = os.urandom(VALUE_BYTES)
    started = time.perf_counter()
    for group in range(groups):
        filled = {storage_key(key): value for key in range(group, entries, groups)}
        cache.replace(spaces[group], tokens[group], filled)
    filled_seconds = round(time.perf_counter() - started, 2)
    print(json.dumps({"filled_seconds": filled_seconds, "entries": entries}), flush=True)
    rng = random.Random(seed)
    for batch in range(batches):
        touched: dict[int, set[int]] = {}
        for _ in range(changes):
            key = rng.randrange(entries)
            touched.setdefault(key % groups, set()).add(key)
        read = write = 0.0
        for group, keys in touched.items():
            space = spaces[group]
            before = time.perf_counter()
            reader = cache.begin(space, tokens[group])
            if reader is None:
                raise SystemExit(f"the copy of grouping key {group} was lost (the cache is off?)")
            for key in keys:
                cache.get(reader, space, storage_key(key))
            cache.end(reader)
            middle = time.perf_counter()
            token = os.urandom(16)
            cache.update(space, tokens[group], token, {storage_key(k): os.urandom(VALUE_BYTES) for k in keys})
            tokens[group] = token
            write += time.perf_counter() - middle
            read += middle - before
        figures = {"batch": batch, "read_seconds": round(read, 3), "write_seconds": round(write, 3)}
        print(json.dumps(figures), flush=True)
    summary = {
        "data_file_bytes": (path / "data.mdb").stat().st_size,
        "enabled": cache.enabled,
        "map_resizes": getattr(cache, "resizes", None),  # builds before 34138f0 have no resizes
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
