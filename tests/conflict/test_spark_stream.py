"""The ConflictProcessor in a real Spark streaming query (event time, RocksDB state store).

Four micro-batches (one file each, ``maxFilesPerTrigger=1``), a watermark with no delay on the
changes' ``ts``. Keys 1 and 2 are buffered in batch 0 (timers at watermark 0 + 1); batch 1
(watermark 1000) buffers key 1's update and fires both timers: key 1 compacts ``+I a -U a +U b``
to ``+I b``, key 2 emits ``+I a``. Batch 2 (watermark 2000) buffers key 3 and key 2's delete
(timers at 2001: nothing fires). Batch 3 (watermark 3000) fires them: ``+I`` of key 3 and
``-D`` of key 2 (the stored row); key 4, buffered in the last batch, stays pending (no later
watermark reaches it without more input).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession, functions

from upsertmat.impls.settings import Backend, Settings
from upsertmat.spark.config import PipelineConfig, PipelineConfigError
from upsertmat.spark.conflict import OUTPUT_SCHEMA, ConflictProcessor
from upsertmat.spark.parts import Column, SinkSpec, SourceSpec, SparkOptions
from upsertmat.spark.pipeline import read_table, run_pipeline
from upsertmat.spark.processor import ProcessorSpec
from upsertmat.spark.session import build_session
from upsertmat.spark.sources.formats import SourceFormat
from upsertmat.spec import ConflictBehavior, Keys

from ..spark.harness import kill_after_batches

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCHEMA = "grp STRING, arrival LONG, op STRING, row STRING, ts LONG"
BATCHES: list[list[tuple[str, list[Any], int]]] = [
    [("+I", [1, 10, "a"], 1000), ("+I", [2, 10, "a"], 1000)],
    [("-U", [1, 10, "a"], 2000), ("+U", [1, 20, "b"], 2000)],
    [("+I", [3, 1, "x"], 3000), ("-D", [2, 10, "a"], 3000)],
    [("+I", [4, 1, "y"], 4000)],
]
EXPECTED = {
    1: [("+I", [1, 20, "b"]), ("+I", [2, 10, "a"])],
    3: [("+I", [3, 1, "x"]), ("-D", [2, 10, "a"])],
}
Emitted = dict[int, list[tuple[str, list[Any]]]]


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    yield build_session(
        app_name="upsertmat-conflict-tests"
    )  # shared with other Spark tests; not stopped here


def stage_batch(directory: Path, number: int, lines: list[dict[str, Any]], start: float) -> None:
    """Batch file ``number`` (lines reversed) with modification time ``start + number``: the file
    source takes files in that order, one per micro-batch."""
    staged = directory.parent / f"b{number}.tmp"
    staged.write_text("".join(json.dumps(line) + "\n" for line in reversed(lines)))
    os.utime(staged, (start + number, start + number))
    staged.rename(directory / f"b{number}.json")


def write_batches(directory: Path, numbers: range) -> None:
    """Files for the batches ``numbers``, modification times 1 s apart (the file source's order)."""
    start = time.time() - len(BATCHES) - 10
    for number in numbers:
        arrival = sum(len(batch) for batch in BATCHES[:number])
        lines = []
        for op, row, ts in BATCHES[number]:
            line = {"grp": json.dumps(row[0]), "arrival": arrival, "op": op, "row": json.dumps(row), "ts": ts}
            lines.append(line)
            arrival += 1
        stage_batch(directory, number, lines, start)


def run_query(
    spark: SparkSession, inputs: Path, checkpoint: Path, behavior: ConflictBehavior = ConflictBehavior.NOTHING
) -> Emitted:
    """One availableNow query over what is in ``inputs``: the non-empty outputs per batch id."""
    emitted: Emitted = {}

    def collect(frame: DataFrame, batch_id: int) -> None:
        rows = sorted((row.op, json.loads(row.row)) for row in frame.collect())
        if rows:
            emitted[batch_id] = rows

    spec = ProcessorSpec(
        keys=Keys(pk=(0,)),
        settings=Settings(backend=Backend.SPARK),
        row_json="row",
        arrival="arrival",
        ts="ts",
    )
    source = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .withColumn("event_time", functions.timestamp_millis("ts"))
        .withWatermark("event_time", "0 seconds")
    )
    output = source.groupBy("grp").transformWithState(
        ConflictProcessor(spec, behavior), OUTPUT_SCHEMA, "Append", "EventTime"
    )
    query = (
        output.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert not query.isActive
    return emitted


def test_compaction_happens_in_the_watermark_timers(spark: SparkSession, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_batches(inputs, range(len(BATCHES)))
    assert run_query(spark, inputs, tmp_path / "checkpoint") == EXPECTED


def test_a_restarted_query_continues_from_its_checkpoint(spark: SparkSession, tmp_path: Path) -> None:
    """Stop after two batches, restart on the same checkpoint with the rest: pending changes,
    timers and current rows come back from Spark's state store, and the two runs' outputs
    together are the uninterrupted ones."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_batches(inputs, range(2))
    first = run_query(spark, inputs, tmp_path / "checkpoint")
    write_batches(inputs, range(2, len(BATCHES)))
    second = run_query(spark, inputs, tmp_path / "checkpoint")
    assert {**first, **second} == EXPECTED


def test_an_error_conflict_fails_the_query_naming_the_key_and_rows(
    spark: SparkSession, tmp_path: Path
) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    write_batches(inputs, range(len(BATCHES)))
    two_live = inputs.parent / "late.tmp"  # one more batch: a second live row for key 3
    two_live.write_text(
        json.dumps({"grp": "3", "arrival": 99, "op": "+I", "row": '[3, 2, "z"]', "ts": 5000}) + "\n"
    )
    two_live.rename(inputs / "b9.json")
    more = inputs.parent / "later.tmp"  # and one whose watermark fires key 3's timer
    more.write_text(
        json.dumps({"grp": "5", "arrival": 100, "op": "+I", "row": '[5, 1, "w"]', "ts": 6000}) + "\n"
    )
    os.utime(more, (time.time() + 5, time.time() + 5))
    more.rename(inputs / "b10.json")
    with pytest.raises(StreamingQueryException, match=r"Primary key constraint violation: sink key \[3\]"):
        run_query(spark, inputs, tmp_path / "checkpoint", ConflictBehavior.ERROR)


PIPELINE_COLUMNS = (Column("id", "long"), Column("level", "long"), Column("name", "string"))
"""The row's columns; the source's records also hold ``op``, ``seq`` and ``ts`` (its event time)."""


def pipeline_source(inputs: Path) -> SourceSpec:
    return SourceSpec(inputs, SourceFormat.JSONL, PIPELINE_COLUMNS, ts_column="ts")


@pytest.mark.parametrize("buckets", [None, 4], ids=["per-key", "buckets"])
def test_the_pipeline_runs_the_compacting_behaviour_into_the_sink(
    spark: SparkSession, tmp_path: Path, buckets: int | None
) -> None:
    """``run_pipeline`` with ``conflict=NOTHING``: the SQLite table after the four batches (key 4
    still pending: no later watermark), and ts is required."""
    inputs = tmp_path / "in"
    inputs.mkdir()
    start = time.time() - 20
    seq = 0
    for number, batch in enumerate(BATCHES):
        lines = []
        for op, row, ts in batch:
            lines.append({"seq": seq, "op": op, "id": row[0], "level": row[1], "name": row[2], "ts": ts})
            seq += 1
        stage_batch(inputs, number, lines, start)
    config = PipelineConfig(
        source=pipeline_source(inputs),
        sink=SinkSpec(f"sqlite:///{tmp_path / 'sink.db'}", "sink"),
        primary_key=("id",),
        checkpoint=tmp_path / "checkpoint",
        spark=SparkOptions(max_files_per_trigger=1, key_buckets=buckets),
        conflict=ConflictBehavior.NOTHING,
    )
    assert PipelineConfig.from_json(config.to_json()) == config
    run_pipeline(config, spark)
    table = [tuple(row) for row in read_table(config, spark)]
    if buckets is None:
        assert table == [(1, 20, "b"), (3, 1, "x")]
    else:
        # A bucket compacts all its pending sink keys when its timer fires: key 4 is compacted
        # in the last batch if it shares a bucket with a key whose timer fires there.
        assert [row for row in table if row[0] != 4] == [(1, 20, "b"), (3, 1, "x")]
        assert [row for row in table if row[0] == 4] in ([], [(4, 1, "y")])
    with pytest.raises(PipelineConfigError, match=r"set source\.ts_column"):
        replace(config, source=replace(config.source, ts_column=None), checkpoint=tmp_path / "other")


def test_a_pipeline_killed_mid_stream_ends_with_the_uninterrupted_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    """NOTHING with SIGKILL after 3 of 8 batches, restarted on its checkpoint: the same table as
    one uninterrupted run (pending changes, timers and current rows are in Spark's checkpointed
    state; the sink skips a batch it has already committed)."""
    rnd = random.Random(5)
    inputs = tmp_path / "in"
    inputs.mkdir()
    live: dict[int, list[Any]] = {}
    seq = 0
    start = time.time() - 30
    for number in range(8):
        lines: list[dict[str, Any]] = []
        for _ in range(30):
            key = rnd.randrange(25)
            old = live.get(key)
            row = [key, seq, f"v{seq}"]
            if old is not None:
                lines.append(
                    {
                        "seq": seq,
                        "op": "-U",
                        "id": old[0],
                        "level": old[1],
                        "name": old[2],
                        "ts": 1000 * number,
                    }
                )
                seq += 1
            lines.append(
                {
                    "seq": seq,
                    "op": "+U" if old else "+I",
                    "id": key,
                    "level": row[1],
                    "name": row[2],
                    "ts": 1000 * number,
                }
            )
            seq += 1
            live[key] = row
        stage_batch(inputs, number, lines, start)
    config = PipelineConfig(
        source=pipeline_source(inputs),
        sink=SinkSpec(f"sqlite:///{tmp_path / 'sink.db'}", "killed"),
        primary_key=("id",),
        checkpoint=tmp_path / "checkpoint",
        spark=SparkOptions(max_files_per_trigger=1),
        conflict=ConflictBehavior.NOTHING,
    )
    assert kill_after_batches(config, tmp_path, 3) == 3
    run_pipeline(config, spark)
    whole = replace(
        config,
        checkpoint=tmp_path / "checkpoint2",
        sink=SinkSpec(f"sqlite:///{tmp_path / 'ref.db'}", "whole"),
    )
    run_pipeline(whole, spark)
    table = [tuple(row) for row in read_table(config, spark)]
    assert len(table) > 10
    assert table == [tuple(row) for row in read_table(whole, spark)]
