"""What one call to Spark's ``transformWithState`` state server costs, and what a byte costs.

``python tools/state_server_cost.py`` runs real Spark (local, RocksDB state store, the
pipeline's own session settings) on a stream of ``--batches`` micro-batches with one input row
per grouping key (``--groups``, 256 like the pipeline's key buckets). Per grouping key and
batch the processor makes the calls a bucket of the pipeline's state layouts makes, timing
each in the Python worker:

- ``ValueState.get`` of a value of ``SIZE`` bytes (the blob layout's read, the log's head read),
- ``ValueState.update`` with ``SIZE`` bytes (the blob's write, the head's write),
- ``ListState.appendList`` of one ``SIZE``-byte element (the log's append; the list is
  cleared every 8 batches so it does not grow without bound).

for every size of ``--sizes`` (a query of its own each; the first batch, which writes into an
empty state, is not counted). Prints one JSON object: per size the median microseconds per call
of each kind over every (grouping key, batch), and a least-squares line
``microseconds = per_call + per_kib * KiB`` for ``get`` and ``update``. Values are random
bytes: the cost of moving them, not of compressing them. The numbers tell which layout a bucket
of a given size should use: a state call is worth ``per_call / per_kib`` KiB moved.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, DoubleType, IntegerType, StructField, StructType

from upsertmat.spark.session import build_session

BLOB = StructType([StructField("v", BinaryType())])
OUTPUT = StructType(
    [
        StructField("group", IntegerType()),
        StructField("get_us", DoubleType()),
        StructField("update_us", DoubleType()),
        StructField("append_us", DoubleType()),
    ]
)
CLEAR_EVERY = 8


class CallTimer(StatefulProcessor):
    """Per grouping key and batch: one get, one update and one appendList of ``size`` bytes."""

    def __init__(self, size: int) -> None:
        self._size = size

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._value = handle.getValueState("value", BLOB)
        self._list = handle.getListState("list", BLOB)
        self._batches = 0

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Row]:
        for _ in rows:
            pass
        payload = os.urandom(self._size)
        started = time.perf_counter()
        self._value.get()
        got = time.perf_counter()
        self._value.update((payload,))
        updated = time.perf_counter()
        self._list.appendList([(payload,)])
        appended = time.perf_counter()
        self._batches += 1
        if self._batches % CLEAR_EVERY == 0:
            self._list.clear()
        yield Row(
            group=int(key[0]),
            get_us=(got - started) * 1e6,
            update_us=(updated - got) * 1e6,
            append_us=(appended - updated) * 1e6,
        )

    def close(self) -> None:
        pass


def measure(spark: Any, root: Path, size: int, groups: int, batches: int) -> dict[str, list[float]]:
    """The timings of every (grouping key, batch) after the first batch, for ``size`` bytes."""
    source = root / f"source-{size}"
    source.mkdir()
    for number in range(batches):
        frame = spark.createDataFrame([(group,) for group in range(groups)], "group INT")
        frame.coalesce(1).write.parquet(str(source / f"batch-{number:03d}"))
    found: dict[str, list[float]] = {"get_us": [], "update_us": [], "append_us": []}
    seen: list[int] = []

    def collect(batch: Any, batch_id: int) -> None:
        rows = batch.collect()
        seen.append(batch_id)
        if batch_id == 0:
            return  # the first batch reads an empty state
        for row in rows:
            for name in found:
                found[name].append(row[name])

    stream = (
        spark.readStream.schema("group INT")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source / "*"))
        .groupBy("group")
        .transformWithState(CallTimer(size), OUTPUT, "Append", "None")
    )
    query = (
        stream.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(root / f"checkpoint-{size}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if len(seen) != batches:
        raise SystemExit(f"state_server_cost: expected {batches} micro-batches, ran {len(seen)}")
    return found


def line(points: list[tuple[float, float]]) -> dict[str, float]:
    """Least squares ``y = per_call + per_kib * x`` over (KiB, microseconds) points (one size:
    no slope, the mean)."""
    xs, ys = [x for x, _ in points], [y for _, y in points]
    if len(set(xs)) < 2:
        slope, intercept = 0.0, statistics.fmean(ys)
    else:
        slope, intercept = statistics.linear_regression(xs, ys)
    return {"per_call_us": round(intercept, 1), "per_kib_us": round(slope, 2)}


def main(argv: list[str] | None = None) -> int:
    """Measure every size, print the JSON result; exit status 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,1024,8192,32768,131072", help="value sizes in bytes")
    parser.add_argument("--groups", type=int, default=256, help="grouping keys per batch (default 256)")
    parser.add_argument("--batches", type=int, default=6, help="micro-batches per size (default 6)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.batches < 2 or args.groups < 1 or any(size < 0 for size in sizes):
        parser.error("--batches must be >= 2, --groups >= 1, sizes >= 0")
    spark = build_session(master=args.master, app_name="state-server-cost")
    result: dict[str, Any] = {"groups": args.groups, "batches": args.batches, "sizes": {}}
    get_points: list[tuple[float, float]] = []
    update_points: list[tuple[float, float]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="state-server-cost-") as scratch:
            for size in sizes:
                found = measure(spark, Path(scratch), size, args.groups, args.batches)
                medians = {name: round(statistics.median(values), 1) for name, values in found.items()}
                result["sizes"][str(size)] = medians
                get_points.append((size / 1024, medians["get_us"]))
                update_points.append((size / 1024, medians["update_us"]))
                print(f"state_server_cost: {size} B: {medians}", file=sys.stderr)
    finally:
        spark.stop()
    result["get_line"] = line(get_points)
    result["update_line"] = line(update_points)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
