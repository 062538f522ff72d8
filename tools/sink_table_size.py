"""What one micro-batch costs a lakehouse sink against the size of its table (docs/spark.md,
*Which sink for which table size*).

``python tools/sink_table_size.py --sizes 100000,1000000 --kinds paimon,delta`` creates, per
kind and size, a table of that many rows (one batch), then applies ``--batches`` batches of
``--changes`` random-key changes each (``--deletes`` of them deletes of keys the table holds, the
rest updates of keys it holds, new values), through the sink itself (``BatchSink.apply_batch``,
as the pipeline's driver calls it, without Spark). Per batch: the wall time of ``apply_batch``,
its process CPU time (threads included: delta-rs merges on several; the figure that moves least
with the machine's load) and the bytes it wrote (the table directory's growth). With
``--reads``, the result reads at the end: ``SinkKind.snapshot`` (all rows twice, the first 1,000,
``limit=0``), ``SinkKind.changes`` of the last batch (twice: a process computes a Paimon batch's
changes once, so the first read of each is measured with that cache emptied) and the table
format's own full ``scan``; the sinks are then opened with ``changelog=True`` (Delta's change
data feed on). Prints one JSON object per
measurement, with the load average after it. The tables are written under ``--dir`` (default:
a temporary directory, removed at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from upsertmat.sinks import Column, kind_named, paimon
from upsertmat.sinks.reading import position

COLUMNS = (
    Column("id", "bigint"),
    Column("version", "bigint"),
    Column("amount", "double"),
    Column("payload", "string"),
)
PK = (0,)


def size_of(path: Path) -> int:
    """Bytes of the files under ``path``."""
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def row(key: int, version: int) -> tuple[Any, ...]:
    """The table's row of ``key`` at ``version``."""
    return (key, version, key * 0.25 + version, f"payload-{key}-{version}")


def report(**fields: Any) -> None:
    """One measurement as a JSON line, with the machine's load average (1, 5, 15 minutes)."""
    fields["load_average"] = " ".join(f"{value:.1f}" for value in os.getloadavg())
    print(json.dumps(fields), flush=True)


def measure(kind_name: str, size: int, args: argparse.Namespace, root: Path) -> None:
    """Load a table of ``size`` rows into a sink of ``kind_name``, apply and time the batches,
    then the reads (see the module)."""
    kind = kind_named(kind_name)
    url = kind.url_in(root, f"t{size}")
    path = kind.local_path(url)
    assert path is not None
    sink = kind.open(url, "t", COLUMNS, PK, changelog=args.reads)  # Delta: its change feed on
    rng = random.Random(size)
    started = time.perf_counter()
    sink.apply_batch("q", 0, [("+I", row(key, 0)) for key in range(size)])
    report(
        kind=kind_name, rows=size, load_seconds=round(time.perf_counter() - started, 2), bytes=size_of(path)
    )
    present = set(range(size))
    times: list[float] = []
    cpus: list[float] = []
    written: list[int] = []
    for batch in range(1, args.batches + 1):
        keys = rng.sample(sorted(present) if len(present) < size else range(size), args.changes)
        deletes = set(keys[: args.deletes])
        changes = [("-D", row(key, 0)) if key in deletes else ("+U", row(key, batch)) for key in keys]
        before = size_of(path)
        cpu = time.process_time()
        started = time.perf_counter()
        sink.apply_batch("q", batch, changes)
        times.append(time.perf_counter() - started)
        cpus.append(time.process_time() - cpu)
        written.append(size_of(path) - before)
        present -= deletes
        report(
            kind=kind_name,
            rows=size,
            batch=batch,
            seconds=round(times[-1], 3),
            cpu_seconds=round(cpus[-1], 3),
            bytes_written=written[-1],
        )
    sink.close()
    report(
        kind=kind_name,
        rows=size,
        batches=args.batches,
        median_seconds=round(statistics.median(times), 3),
        median_cpu_seconds=round(statistics.median(cpus), 3),
        median_bytes=statistics.median(written),
        files=kind.data_files(url, "t"),
        table_bytes=size_of(path),
    )
    if args.reads:
        reads: dict[str, Any] = {"kind": kind_name, "rows": size}
        last = position(args.batches, 0) - 1
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("snapshot_seconds", lambda: kind.snapshot(url, "t", ["id"])),
            ("snapshot_again_seconds", lambda: kind.snapshot(url, "t", ["id"])),
            ("snapshot_1000_rows_seconds", lambda: kind.snapshot(url, "t", ["id"], 1000)),
            ("snapshot_header_seconds", lambda: kind.snapshot(url, "t", ["id"], 0)),
            ("changes_last_batch_seconds", lambda: kind.changes(url, "t", last, 10**9)),
            ("changes_again_seconds", lambda: kind.changes(url, "t", last, 10**9)),
            ("scan_seconds", lambda: kind.scan(url, "t")),
        ]
        for name, read in steps:
            if name == "scan_seconds" and args.no_scan:
                continue
            if kind_name == "paimon" and name in ("snapshot_seconds", "changes_last_batch_seconds"):
                paimon.forget_changes()  # a first read: the batch's changes computed
            started = time.perf_counter()
            result = read()
            reads[name] = round(time.perf_counter() - started, 3)
            if name == "snapshot_seconds":
                reads["snapshot_total"] = result.total
            if name == "changes_last_batch_seconds":
                reads["changes"] = len(result)
        report(**reads)
    if not args.keep:
        kind.drop(url, "t")
        shutil.rmtree(path, ignore_errors=True)


def main() -> None:
    """The command line (see the module)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="table sizes in rows, comma-separated")
    parser.add_argument("--kinds", default="paimon,delta", help="sink kinds, comma-separated")
    parser.add_argument("--batches", type=int, default=3, help="measured batches per table")
    parser.add_argument("--changes", type=int, default=20_000, help="changes per batch (random keys)")
    parser.add_argument("--deletes", type=int, default=2_000, help="of which deletes")
    parser.add_argument("--reads", action="store_true", help="measure the result reads at the end")
    parser.add_argument("--no-scan", action="store_true", help="with --reads, skip the format's own scan")
    parser.add_argument("--dir", type=Path, default=None, help="where to write the tables")
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="sink-table-size-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        for size in (int(item) for item in args.sizes.split(",")):
            for kind_name in args.kinds.split(","):
                measure(kind_name, size, args, root)
    finally:
        if args.dir is None and not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
