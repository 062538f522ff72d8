"""Feed changelog streams through the real Spark processor and collect what it emits.

Every stream gets its own arrival range and a grouping column ``grp`` = stream number + the
row's canonical context key, so many streams share one streaming query without sharing state.
The inputs are split into ``batches`` files (one micro-batch each, ``maxFilesPerTrigger=1``);
each file is written in reverse arrival order so the processor's sort is exercised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from upsertmat.impls.settings import Settings
from upsertmat.spark import PipelineConfig
from upsertmat.spark.misses import MISS_OP
from upsertmat.spark.processor import OUTPUT_SCHEMA, MaterializerProcessor, ProcessorSpec
from upsertmat.spec import Change, Keys, RowKind

from .cluster import kill_tree
from .run_config import SCRIPT as RUN_CONFIG

INPUT_SCHEMA = "grp STRING, arrival LONG, op STRING, row STRING"


def write_batches(directory: Path, batches: Sequence[Sequence[dict[str, Any]]]) -> None:
    """One JSON Lines file per batch, lines reversed, modification times 1 s apart.

    Spark's file source takes files in modification-time order: files written within one clock
    tick would otherwise be read in any order.
    """
    start = time.time() - len(batches) - 10
    for number, lines in enumerate(batches):
        staged = directory.parent / f"b{number:04d}.tmp"
        staged.write_text("".join(json.dumps(line) + "\n" for line in reversed(lines)))
        os.utime(staged, (start + number, start + number))
        staged.rename(directory / f"b{number:04d}.json")


def run_streams(
    spark: SparkSession,
    workdir: Path,
    keys: Keys,
    settings: Settings,
    streams: Sequence[Sequence[Change]],
    batches: int = 3,
) -> list[list[tuple[int, Change]]]:
    """For each stream, (input index, emitted change) in emission order, computed on Spark."""
    inputs = workdir / "in"
    inputs.mkdir(parents=True)
    records: list[list[dict[str, Any]]] = [[] for _ in range(batches)]
    owner: dict[int, tuple[int, int]] = {}
    arrival = 0
    for number, stream in enumerate(streams):
        for index, change in enumerate(stream):
            owner[arrival] = (number, index)
            context = keys.context_key(change.row).decode()
            records[index * batches // max(len(stream), 1)].append(
                {
                    "grp": f"{number}|{context}",
                    "arrival": arrival,
                    "op": change.kind.value,
                    "row": json.dumps(list(change.row)),
                }
            )
            arrival += 1
    write_batches(inputs, records)
    emitted: list[tuple[int, str, str]] = []

    def collect(frame: DataFrame, batch_id: int) -> None:
        emitted.extend((row.arrival, row.op, row.row) for row in frame.collect())

    spec = ProcessorSpec(keys=keys, settings=settings, row_json="row", arrival="arrival")
    source = spark.readStream.schema(INPUT_SCHEMA).option("maxFilesPerTrigger", 1).json(str(inputs))
    output = source.groupBy("grp").transformWithState(
        MaterializerProcessor(spec), OUTPUT_SCHEMA, "Append", "None"
    )
    query = (
        output.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(workdir / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    results: list[list[tuple[int, Change]]] = [[] for _ in streams]
    for position, op, row in sorted(emitted):
        if op == MISS_OP:  # a miss's explanation (upsertmat.spark.misses), not an output change
            continue
        number, index = owner[position]
        results[number].append((index, Change(RowKind.parse(op), tuple(json.loads(row)))))
    return results


def start_run(config: PipelineConfig, workdir: Path) -> subprocess.Popen[str]:
    """``config`` running in a subprocess of its own session (``tests/spark/run_config.py``, its
    config in ``workdir / "config.json"``), its stdout (the JSON batch reports) piped."""
    path = workdir / "config.json"
    path.write_text(config.to_json())
    return subprocess.Popen(
        [sys.executable, str(RUN_CONFIG), str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )


def kill_after_batches(config: PipelineConfig, workdir: Path, batches: int) -> int:
    """Run ``config`` in a subprocess (:func:`start_run`); SIGKILL it and its JVM after
    ``batches`` batch reports (each must be a JSON line). Returns the reports seen."""
    process = start_run(config, workdir)
    reports = 0
    deadline = time.monotonic() + 240
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("{") and "batch_id" in line:
                reports += 1
                json.loads(line)
                if reports >= batches:
                    break
            if time.monotonic() > deadline:
                break
    finally:
        kill_tree(process)
    return reports
