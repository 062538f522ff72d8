"""``run_pipeline(config) -> PipelineResult``: changelog files -> materializer -> upsert sink.

The query: :func:`~.sources.read_changelog` -> ``groupBy(pk).transformWithState(``
:class:`~.processor.MaterializerProcessor` ``)`` (skipped when ``config.materialize`` is False)
-> ``foreachBatch``: collect the batch on the driver, order it by arrival, and apply it to the
sink in one transaction together with the batch id (:mod:`.sink`). Checkpointed in
``config.checkpoint_dir``: offsets, commits and the RocksDB state store. Restarting on the same
checkpoint continues where the last committed batch ended; a batch re-run after a crash is
recognised by its id and skipped in the sink, so the table sees every batch exactly once.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import msgpack
from pyspark.sql import DataFrame, SparkSession, functions

from ..impls.misses import MissSummary
from ..impls.settings import Backend, Settings, TimeDomain
from ..spec import Keys
from ..spec.changes import Row
from .config import BatchProgress, BatchTiming, PipelineConfig, PipelineConfigError, PipelineResult
from .conflict import build_conflict_frame
from .misses import MISS_OP, short_columns, split_misses, summarize
from .packing import pack_changes, packable, packed_schema
from .processor import (
    BATCHED_OUTPUT_SCHEMA,
    OUTPUT_SCHEMA,
    SPARK_STRATEGIES,
    MaterializerProcessor,
    ProcessorSpec,
)
from .session import build_session
from .sink import Column, SinkFailure, UpsertSink, open_sink
from .sources import read_changelog

BUCKET = "_upsertmat_bucket"
Change = tuple[int, str, Row]  # (arrival, op, row) as the sink receives it
Decoder = Callable[[Any], list[Change]]


@dataclass(frozen=True)
class Layout:
    """The resolved column layout of a config: row columns, key indexes, sink columns."""

    columns: tuple[str, ...]
    keys: Keys
    sink_columns: tuple[Column, ...]


def resolve_layout(config: PipelineConfig, types: dict[str, str]) -> Layout:
    """Check the config's column names against the source schema (``name -> simple type``)."""
    special = {config.op_column, config.arrival_column} | ({config.ts_column} if config.ts_column else set())
    for name in special:
        if name not in types:
            raise PipelineConfigError(f"column {name!r} is not in the source schema {list(types)}")
    columns = config.columns or tuple(name for name in types if name not in special)
    for name in (*columns, *config.pk, *config.upsert_key):
        if name not in types:
            raise PipelineConfigError(f"column {name!r} is not in the source schema {list(types)}")
    for name in (*config.pk, *config.upsert_key):
        if name not in columns:
            raise PipelineConfigError(f"key column {name!r} is not one of the row columns {list(columns)}")
    if not config.pk:
        raise PipelineConfigError("the sink primary key (pk) needs at least one column")
    keys = Keys(
        pk=tuple(columns.index(name) for name in config.pk),
        upsert_key=tuple(columns.index(name) for name in config.upsert_key),
    )
    return Layout(columns, keys, tuple(Column(name, types[name]) for name in columns))


def materializer_settings(config: PipelineConfig) -> Settings:
    """The strategy settings of ``config`` on the spark backend (PipelineConfigError if unsupported)."""
    if config.strategy not in SPARK_STRATEGIES:
        names = ", ".join(strategy.value for strategy in SPARK_STRATEGIES)
        raise PipelineConfigError(
            f"strategy {config.strategy.value} does not run on spark; use one of {names}"
        )
    if config.ttl.enabled and config.ttl.time_domain is not TimeDomain.PROCESSING_TIME:
        raise PipelineConfigError(
            "the Spark pipeline supports processing-time state TTL only "
            "(upsertmat.state.ttl.time-domain = processing_time); see docs/spark.md"
        )
    return Settings(
        strategy=config.strategy,
        backend=Backend.SPARK,
        ttl=config.ttl,
        threshold_high=config.threshold_high,
        threshold_low=config.threshold_low,
        miss_rows=config.miss_rows,
    )


def build_query_frame(
    config: PipelineConfig, source: DataFrame, layout: Layout
) -> tuple[DataFrame, Decoder, str]:
    """(frame to sink, decoder of a collected batch, time mode).

    The decoder takes the batch as a pyarrow Table (``DataFrame.toArrow()``: columnar, no
    per-row pickling through py4j) and returns its ``(arrival, op, row)`` changes, unsorted.
    """
    if not config.materialize:
        columns, arrival, op = layout.columns, config.arrival_column, config.op_column

        def raw(table: Any) -> list[Change]:
            values = [table.column(name).to_pylist() for name in columns]
            rows = zip(*values, strict=True) if values else iter(())
            arrivals, ops = table.column(arrival).to_pylist(), table.column(op).to_pylist()
            return list(zip(arrivals, ops, rows, strict=True))

        return source.select(arrival, op, *columns), raw, "None"
    if config.conflict.compacting:  # ON CONFLICT DO ERROR | NOTHING: upsertmat.spark.conflict
        frame, _, conflict_time_mode = build_conflict_frame(config, source, layout)
        return frame, materialized_changes, conflict_time_mode  # plain (arrival, op, row) rows
    settings = materializer_settings(config)
    spec = ProcessorSpec(
        keys=layout.keys,
        settings=settings,
        columns=layout.columns,
        op=config.op_column,
        arrival=config.arrival_column,
        ts=config.ts_column,
        # The sink keeps only the last change per key of a batch: with buckets, reduce before
        # shipping (a bucket holds many changes of each key; every row costs ~10 µs to ship).
        last_per_key=config.key_buckets is not None,
        # A bucket's state as one blob: two state calls per bucket and batch.
        blob_state=config.key_buckets is not None,
        packed=config.key_buckets is not None and packable(column_types(source), spec_fields(config, layout)),
        # One output row per bucket and batch holding all its changes (the bucket's keys are
        # reduced to their last change first): pyspark's per-row conversions are paid per bucket.
        batched_output=config.key_buckets is not None,
    )
    # TTL needs the batch timestamp (and cleanup timers): processing-time mode. The session
    # must disable no-data micro-batches, or availableNow never ends in this mode.
    time_mode = "ProcessingTime" if settings.ttl.enabled else "None"
    if config.key_buckets is None:
        grouped = source.groupBy(*config.pk)
    else:
        bucket = functions.pmod(functions.xxhash64(*config.pk), functions.lit(config.key_buckets))
        if spec.packed:
            # One row per bucket and Arrow batch instead of one per change (upsertmat.spark.packing).
            fields = [functions.col(name) for name in spec.packed_fields()]
            source = source.select(bucket.alias(BUCKET), *fields).mapInArrow(
                pack_changes, packed_schema(BUCKET)
            )
        else:
            source = source.withColumn(BUCKET, bucket)
        grouped = source.groupBy(BUCKET)
    schema = BATCHED_OUTPUT_SCHEMA if spec.batched_output else OUTPUT_SCHEMA
    frame = grouped.transformWithState(MaterializerProcessor(spec), schema, "Append", time_mode)
    return frame, materialized_changes, time_mode


def materialized_changes(table: Any) -> list[Change]:
    """(arrival, op, row) of the materializer's output (a pyarrow Table): one per output row
    (``arrival, op, row``: each row text parsed once with ``json.loads``), or, for batched
    output (``arrival, op, changes``: ``ProcessorSpec.batched_output``), the msgpack triples
    of every row. O(changes)."""
    arrivals = table.column("arrival").to_pylist()
    ops = table.column("op").to_pylist()
    if "changes" in table.column_names:
        changes: list[Change] = []
        unpackb = msgpack.unpackb
        for arrival, op, blob in zip(arrivals, ops, table.column("changes").to_pylist(), strict=True):
            if op == MISS_OP:  # a miss's explanation (upsertmat.spark.misses), not a change
                changes.append((arrival, op, (unpackb(blob, raw=False),)))
            else:
                changes.extend(unpackb(blob, use_list=False, raw=False))
        return changes
    loads = json.loads
    texts = table.column("row").to_pylist()
    return [
        (arrival, op, (text,) if op == MISS_OP else tuple(loads(text)))
        for arrival, op, text in zip(arrivals, ops, texts, strict=True)
    ]


def spec_fields(config: PipelineConfig, layout: Layout) -> list[str]:
    """The source columns the processor reads: arrival, op, ts (if set), the row's columns."""
    ts = [config.ts_column] if config.ts_column else []
    return [config.arrival_column, config.op_column, *ts, *layout.columns]


def column_types(frame: DataFrame) -> dict[str, str]:
    """``name -> Spark simple type`` of ``frame``'s columns."""
    return {item.name: item.dataType.simpleString() for item in frame.schema}


def checkpoint_query_id(checkpoint_dir: Path) -> str:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (stable across restarts)."""
    metadata = json.loads((checkpoint_dir / "metadata").read_text().splitlines()[0])
    return str(metadata["id"])


def run_pipeline(config: PipelineConfig, spark: SparkSession | None = None) -> PipelineResult:
    """Run the pipeline ``config`` describes until the input is drained (``available_now``) or
    ``timeout_seconds`` pass; report each micro-batch to ``config.progress``.

    ``spark``: an existing session (the tests share one); by default one is built with
    :func:`~.session.build_session`. Raises PipelineConfigError for a bad config (before
    starting anything), SinkError for sink problems, and Spark's StreamingQueryException when
    the query fails (the sink keeps every batch committed before the failure).
    """
    if spark is None:
        spark = build_session(
            master=config.master, shuffle_partitions=config.shuffle_partitions, conf=config.spark_conf
        )
    else:
        spark.conf.set("spark.sql.shuffle.partitions", str(config.shuffle_partitions))
    source = read_changelog(spark, config)
    layout = resolve_layout(config, column_types(source))
    frame, decode, _time_mode = build_query_frame(config, source, layout)
    sink = open_sink(config.sink_url, config.table, layout.sink_columns, layout.keys.pk)
    batches: list[BatchProgress] = []
    misses = MissSummary()  # every explained miss of this run (upsertmat.spark.misses)
    explained = config.materialize and not config.conflict.compacting and config.miss_rows > 0
    started = time.monotonic()
    query_ids: list[str] = []
    failures: list[SinkFailure] = []  # raised inside Spark's foreachBatch: reported as they are

    def apply(batch: DataFrame, batch_id: int) -> None:
        begin = time.monotonic()
        if not query_ids:
            query_ids.append(checkpoint_query_id(config.checkpoint_dir))
        changes = decode(batch.toArrow())
        changes, explained_misses = split_misses(changes) if explained else (changes, [])
        changes.sort(key=itemgetter(0))
        written = time.monotonic()
        try:
            outcome = sink.apply_batch(
                query_ids[0], batch_id, [(op, row) for _, op, row in changes], explained_misses
            )
        except SinkFailure as failure:
            failures.append(failure)
            raise
        end = time.monotonic()
        progress = BatchProgress(
            batch_id=batch_id,
            changes=len(changes),
            upserts=outcome.upserts,
            deletes=outcome.deletes,
            skipped=outcome.skipped,
            sink_seconds=end - begin,
            elapsed_seconds=end - started,
            write_seconds=end - written,
            misses=len(explained_misses),
            miss_columns=short_columns(summarize(explained_misses), layout.columns)
            if explained_misses
            else "",
        )
        if explained_misses and not outcome.skipped:
            summarize(explained_misses, misses)
        batches.append(progress)
        if config.progress is not None:
            config.progress(progress)

    writer = (
        frame.writeStream.foreachBatch(apply)
        .option("checkpointLocation", str(config.checkpoint_dir))
        .queryName(f"upsertmat_{config.table}")
    )
    writer = (
        writer.trigger(availableNow=True)
        if config.available_now
        else writer.trigger(processingTime=config.trigger_interval)
    )
    try:
        query = writer.start()
        try:
            if config.timeout_seconds is None:
                query.awaitTermination()
            else:
                query.awaitTermination(max(1, math.ceil(config.timeout_seconds)))
        except Exception:
            if failures:  # the sink failed: its own message, not Spark's wrapped traceback
                raise failures[-1] from None
            raise
        finally:
            if query.isActive:
                query.stop()
        reports = query.recentProgress
        input_rows = sum(int(report.get("numInputRows", 0)) for report in reports)
        timings = tuple(batch_timing(report) for report in reports if int(report.get("numInputRows", 0)))
        return PipelineResult(
            tuple(batches), input_rows, time.monotonic() - started, str(query.id), timings, misses
        )
    finally:
        sink.close()


def batch_timing(report: Any) -> BatchTiming:
    """A :class:`BatchTiming` from one of Spark's progress reports (``StreamingQueryProgress``)."""
    operators = report.get("stateOperators") or []
    return BatchTiming(
        batch_id=int(report.get("batchId", -1)),
        input_rows=int(report.get("numInputRows", 0)),
        durations_ms={str(name): int(ms) for name, ms in (report.get("durationMs") or {}).items()},
        state_commit_ms=sum(int(operator.get("commitTimeMs", 0)) for operator in operators),
        state_rows=sum(int(operator.get("numRowsTotal", 0)) for operator in operators),
    )


def read_table(config: PipelineConfig, spark: SparkSession | None = None) -> list[Row]:
    """The sink table's rows ordered by primary key (opens its own connection)."""
    sink = _open_config_sink(config, spark)
    try:
        return sink.rows()
    finally:
        sink.close()


def _open_config_sink(config: PipelineConfig, spark: SparkSession | None) -> UpsertSink:
    spark = spark or build_session(
        master=config.master, shuffle_partitions=config.shuffle_partitions, conf=config.spark_conf
    )
    layout = resolve_layout(config, column_types(spark.createDataFrame([], config.schema)))
    return open_sink(config.sink_url, config.table, layout.sink_columns, layout.keys.pk)
