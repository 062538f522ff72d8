"""The pipeline's materializer stage without Spark's JVM: the cost of the Python processor alone.

``python tools/processor_cost.py`` drives the real ``MaterializerProcessor`` with pyspark's
in-memory harness (``TwsTester``) in the configuration ``upsertmat bench --pipeline`` runs
(VALUE, 256 key buckets, packed input, one state blob per bucket, one output row per bucket and
batch) over the bench's own changelog (``--changes`` over ``--keys`` keys: every key inserted,
then ``-U``/``+U`` pairs of random keys; ``--files`` micro-batches), packed by the pipeline's
own ``pack_changes``. No JVM, no shuffle, no state
store: what is left is the processor's own Python work, which is the largest share of the
pipeline's stateful stage. Prints one JSON object: output rows, process CPU seconds, state
bytes at the end. Timings of a shared machine vary by tens of percent from run to run; to
compare two versions, count instructions instead (docs/benchmarks-history.md, "The pipeline against
f46d53d")::

    valgrind --tool=callgrind python tools/processor_cost.py --changes 100000 --files 10
    valgrind --tool=callgrind python tools/processor_cost.py --changes 100000 --files 10 --no-run

(the second run builds the same input and processes nothing: subtract it). Bucket of a key:
a multiplicative hash, not Spark's xxhash64 (the spread, not the bucket of a given key, is
what matters here).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester

from upsertmat.bench.pipeline import PipelineBench, changelog_files
from upsertmat.impls.settings import Backend, Settings, Strategy
from upsertmat.spark.packing import BUCKET, PACKED, pack_changes
from upsertmat.spark.processor import MaterializerProcessor, ProcessorSpec
from upsertmat.spec import Keys

BUCKETS = 256
COLUMNS = ("id", "version", "payload")


def batches(changes: int, keys: int, files: int) -> list[dict[int, list[Any]]]:
    """Per micro-batch, the input rows of each bucket: the pipeline bench's source files
    (:func:`~upsertmat.bench.pipeline.changelog_files`), each packed by the pipeline's own
    :func:`~upsertmat.spark.packing.pack_changes` (one row per bucket, as for a source file read
    as one Arrow batch)."""
    found: list[dict[int, list[Any]]] = []
    for chunk in changelog_files(PipelineBench(changes=changes, keys=keys, files=files)):
        columns = {BUCKET: [record["id"] * 2654435761 % 2**32 % BUCKETS for record in chunk]}
        for name in ("seq", "op", *COLUMNS):
            columns[name] = [record[name] for record in chunk]
        rows: dict[int, list[Any]] = {}
        for packed in pack_changes(iter([pa.RecordBatch.from_pydict(columns)])):
            for bucket, blob in zip(packed.column(0).to_pylist(), packed.column(1).to_pylist(), strict=True):
                rows[bucket] = [Row(**{BUCKET: bucket, PACKED: blob})]
        found.append(rows)
    return found


def processor(upsert_key: bool) -> MaterializerProcessor:
    """The processor as the bench's pipeline configures it (whole rows unless ``upsert_key``)."""
    spec = ProcessorSpec(
        keys=Keys(pk=(0,), upsert_key=(0,) if upsert_key else ()),
        settings=Settings(strategy=Strategy.VALUE, backend=Backend.SPARK),
        columns=COLUMNS,
        op="op",
        arrival="seq",
        last_per_key=True,
        blob_state=True,
        packed=True,
        batched_output=True,
    )
    return MaterializerProcessor(spec)


def state_bytes(tester: TwsTester) -> int:
    """Bytes of every state blob the harness holds at the end."""
    total = 0
    seen: set[int] = set()
    pending: list[Any] = [tester.handle]
    while pending:
        item = pending.pop()
        if isinstance(item, bytes | bytearray):
            total += len(item)
        elif id(item) in seen:
            continue
        elif isinstance(item, dict):
            seen.add(id(item))
            pending.extend(item.values())
        elif isinstance(item, list | tuple):
            seen.add(id(item))
            pending.extend(item)
        elif hasattr(item, "__dict__"):
            seen.add(id(item))
            pending.append(vars(item))
    return total


def main(argv: list[str] | None = None) -> int:
    """Run the processor over the workload ``argv`` describes; print the JSON report."""
    parser = argparse.ArgumentParser(
        prog="python tools/processor_cost.py",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--changes", type=int, default=1_000_000, help="changes (default 1,000,000)")
    parser.add_argument("--keys", type=int, help="sink keys (default changes / 10)")
    parser.add_argument("--files", type=int, default=10, help="micro-batches (default 10)")
    parser.add_argument("--upsert-key", action="store_true", help="match on the key id, not whole rows")
    parser.add_argument("--no-run", action="store_true", help="build the input only (a baseline)")
    args = parser.parse_args(argv)
    if args.changes < 1 or args.files < 1 or (args.keys is not None and args.keys < 1):
        parser.error("--changes, --keys and --files must be positive")
    keys = args.keys if args.keys is not None else max(args.changes // 10, 1)
    inputs = batches(args.changes, keys, args.files)
    tester = TwsTester(processor(args.upsert_key))
    outputs = 0
    cpu = time.process_time()
    if not args.no_run:
        for batch in inputs:
            for bucket, rows in batch.items():
                outputs += len(tester.test((bucket,), rows))
    cpu = time.process_time() - cpu
    report = {
        "changes": args.changes,
        "keys": keys,
        "batches": len(inputs),
        "matching": "upsert key" if args.upsert_key else "whole row",
        "output_rows": outputs,
        "cpu_seconds": round(cpu, 3),
        "state_bytes": state_bytes(tester),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
