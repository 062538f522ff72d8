"""``run_pipeline(config) -> PipelineResult``: changelog files -> materializer -> upsert sink.

The query: :func:`~.sources.read_changelog` -> ``groupBy(pk).transformWithState(``
:class:`~.processor.MaterializerProcessor` ``)`` (skipped when ``config.materialize`` is False)
-> ``foreachBatch``: for a sink written from the executors (Paimon: ``BatchSink.task_writer``)
the tasks write their keys' files and the driver commits their messages once with the batch id
(:mod:`.executorwrite`: the driver handles metadata, not rows); for the others, collect the batch
on the driver, order it by arrival, and apply it to the sink in one transaction together with the
batch id (:mod:`upsertmat.sinks`). Checkpointed in
``config.checkpoint``: offsets, commits and the RocksDB state store. Restarting on the same
checkpoint continues where the last committed batch ended; a batch re-run after a crash is
recognised by its id and skipped in the sink, so the table sees every batch exactly once.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import msgpack
from pyspark.sql import DataFrame, SparkSession, functions

from ..impls.config import parse_duration_ms
from ..impls.misses import MissSummary
from ..impls.settings import Backend, Settings
from ..sinks import BatchSink, Column, SinkFailure, open_sink
from ..sinks.arrow import column_rows, column_values
from ..sinks.base import TaskOutput, TaskWriter
from ..spec import Keys
from ..spec.changes import Row
from .config import BatchProgress, BatchTiming, PipelineConfig, PipelineConfigError, PipelineResult
from .conflict import build_conflict_frame
from .executorwrite import CountOnly, write_in_executors
from .misses import MISS_OP, short_columns, split_misses, summarize
from .packing import BUCKET, key_bucket, pack_changes, packable, packed_schema
from .processor import (
    BATCHED_OUTPUT_SCHEMA,
    OUTPUT_SCHEMA,
    MaterializerProcessor,
    ProcessorSpec,
    StateTraffic,
)
from .session import build_session
from .sources import read_changelog
from .sources.badinput import (
    BAD_OP,
    BadInput,
    BadRow,
    DeadLetters,
    SourceShape,
    local_path,
    locate,
    split_bad,
)

# A continuous query runs with a zero processing-time trigger, so that a batch starts as soon as
# the previous one ends while files wait (a processing-time trigger of N ms would start it at
# the next multiple of N: half an interval lost per batch on average once batches take longer
# than N); with nothing new, Spark sleeps this delay before listing the source again (read when
# a query starts). So `trigger_interval` is how often an idle query looks for new files.
POLLING_DELAY_CONF = "spark.sql.streaming.pollingDelay"

SINK_WRITE_VARIABLE = "UPSERTMAT_SINK_WRITE"
"""``driver``: every batch is collected and applied on the driver, also for a sink that is written
from the executors by default (Paimon). For comparisons (docs/spark.md, *Where a batch is
written*); unset, or ``executors``, in a real run."""


def interval_ms(text: str) -> int:
    """Milliseconds of a Spark interval such as ``"1 second"`` or ``"500 milliseconds"``."""
    try:
        return max(1, parse_duration_ms(text))
    except ValueError as error:
        raise PipelineConfigError(f"trigger_interval: {error}") from None


Change = tuple[int, str, Row]  # (arrival, op, row) as the sink receives it
Decoder = Callable[[Any], list[Change]]


@dataclass(frozen=True)
class Layout:
    """The resolved column layout of a config: row columns, key indexes, sink columns."""

    columns: tuple[str, ...]
    keys: Keys
    sink_columns: tuple[Column, ...]


def resolve_layout(config: PipelineConfig, types: dict[str, str]) -> Layout:
    """The layout of ``config``'s source read with its DDL (``types``: the frame's ``name ->
    simple type``). The key columns were checked against the row's columns when the config was
    made (:func:`~.config.check_config`)."""
    columns = config.source.column_names
    keys = Keys(
        pk=tuple(columns.index(name) for name in config.primary_key),
        upsert_key=tuple(columns.index(name) for name in config.upsert_key),
    )
    return Layout(columns, keys, tuple(Column(name, types[name]) for name in columns))


def materializer_settings(config: PipelineConfig) -> Settings:
    """The strategy settings of ``config`` on the spark backend: the strategy, its thresholds,
    TTL and miss rows of ``config.settings`` (a config runs only strategies and TTL settings the
    pipeline supports: :func:`~.config.check_config`); the rest are the library's defaults."""
    return Settings(
        strategy=config.settings.strategy,
        backend=Backend.SPARK,
        ttl=config.settings.ttl,
        threshold_high=config.settings.threshold_high,
        threshold_low=config.settings.threshold_low,
        miss_rows=config.settings.miss_rows,
    )


STATE_COPY = "upsertmat-state-copy"
"""The directory of a local query's checkpoint holding the machine-local copy of its state."""


def build_query_frame(
    config: PipelineConfig, source: DataFrame, layout: Layout, traffic: StateTraffic | None = None
) -> tuple[DataFrame, Decoder, str]:
    """(frame to sink, decoder of a collected batch, time mode). ``traffic``: the accumulators
    the materializer adds its state access to.

    The decoder takes the batch as a pyarrow Table (``DataFrame.toArrow()``: columnar, no
    per-row pickling through py4j) and returns its ``(arrival, op, row)`` changes, unsorted.
    """
    if not config.materialize:
        columns, arrival, op = layout.columns, config.source.order_column, config.source.op_column

        def raw(table: Any) -> list[Change]:
            rows = column_rows(table, columns)
            arrivals, ops = column_values(table.column(arrival)), column_values(table.column(op))
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
        op=config.source.op_column,
        arrival=config.source.order_column,
        ts=config.source.ts_column,
        # The sink keeps only the last change per key of a batch: with buckets, reduce before
        # shipping (a bucket holds many changes of each key; every row costs ~10 µs to ship).
        last_per_key=config.spark.key_buckets is not None,
        # A bucket's state in one Spark value (blob), or logged and read through a local copy.
        blob_state=config.spark.key_buckets is not None,
        log_scope=str(Path(config.checkpoint).resolve()) if config.spark.state_layout == "log" else None,
        # A local query keeps the copy in its checkpoint (deleted with it); executors elsewhere
        # keep theirs on their own disk.
        log_home=str(Path(config.checkpoint).resolve() / STATE_COPY)
        if config.spark.master.startswith("local")
        else None,
        log_inline_max=config.spark.state_inline_bytes,
        packed=config.spark.key_buckets is not None
        and packable(column_types(source), spec_fields(config, layout)),
        # One output row per bucket and batch holding all its changes (the bucket's keys are
        # reduced to their last change first): pyspark's per-row conversions are paid per bucket.
        batched_output=config.spark.key_buckets is not None,
        traffic=traffic,
    )
    # TTL needs the batch timestamp (and cleanup timers): processing-time mode. The session
    # must disable no-data micro-batches, or availableNow never ends in this mode.
    time_mode = "ProcessingTime" if settings.ttl.enabled else "None"
    if config.spark.key_buckets is None:
        grouped = source.groupBy(*config.primary_key)
    else:
        bucket = key_bucket(config.primary_key, config.spark.key_buckets)
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
            if op in (MISS_OP, BAD_OP):  # a miss's explanation or a bad source row, not a change
                changes.append((arrival, op, (unpackb(blob, raw=False),)))
            else:
                changes.extend(unpackb(blob, use_list=False, raw=False))
        return changes
    loads = json.loads
    texts = table.column("row").to_pylist()
    return [
        (arrival, op, (text,) if op in (MISS_OP, BAD_OP) else tuple(loads(text)))
        for arrival, op, text in zip(arrivals, ops, texts, strict=True)
    ]


def spec_fields(config: PipelineConfig, layout: Layout) -> list[str]:
    """The source columns the processor reads: arrival, op, ts (if set), the row's columns."""
    ts = [config.source.ts_column] if config.source.ts_column else []
    return [config.source.order_column, config.source.op_column, *ts, *layout.columns]


def column_types(frame: DataFrame) -> dict[str, str]:
    """``name -> Spark simple type`` of ``frame``'s columns."""
    return {item.name: item.dataType.simpleString() for item in frame.schema}


def checkpoint_query_id(checkpoint_dir: Path) -> str:
    """The query id Spark keeps in ``<checkpoint>/metadata`` (stable across restarts)."""
    metadata = json.loads((checkpoint_dir / "metadata").read_text().splitlines()[0])
    return str(metadata["id"])


def run_pipeline(
    config: PipelineConfig,
    spark: SparkSession | None = None,
    stop: Callable[[], bool] | None = None,
    idle_seconds: float | None = None,
) -> PipelineResult:
    """Run the pipeline ``config`` describes until the input is drained (``available_now``),
    ``timeout_seconds`` pass, ``stop()`` turns true (polled a few times a second; the query
    then stops at a micro-batch boundary, see :meth:`PipelineRun.stop`), or no batch has run
    for ``idle_seconds`` (:meth:`PipelineRun.idle`); report each micro-batch to ``config.progress``.

    ``spark``: an existing session (the tests share one); by default one is built with
    :func:`~.session.build_session`. Raises PipelineConfigError for a bad config (before
    starting anything), SinkError for sink problems, and Spark's StreamingQueryException when
    the query fails (the sink keeps every batch committed before the failure).
    """
    return start_pipeline(config, spark).wait(stop, idle_seconds=idle_seconds)


LAYOUT_MARK = "upsertmat-state-layout"
"""A file of the checkpoint naming the bucket state layout its state was written in (``log``)."""


def check_state_layout(config: PipelineConfig) -> None:
    """PipelineConfigError when ``config`` asks for the blob layout on a checkpoint whose state
    is logged (the blob layout cannot read logs: it would see empty buckets); with the log layout,
    mark the checkpoint so. O(1)."""
    if config.spark.key_buckets is None or not config.materialize:
        return
    mark = Path(config.checkpoint) / LAYOUT_MARK
    if config.spark.state_layout == "blob" and mark.exists():
        raise PipelineConfigError(
            f"the checkpoint {config.checkpoint} holds its state in the log layout: run it with "
            "state_layout log (job files: spark.state-layout: log), or start a new checkpoint and sink"
        )
    if config.spark.state_layout == "log" and not mark.exists():
        mark.parent.mkdir(parents=True, exist_ok=True)
        mark.write_text("log\n", encoding="utf-8")


def start_pipeline(config: PipelineConfig, spark: SparkSession | None = None) -> PipelineRun:
    """Start the query ``config`` describes and return at once (:meth:`PipelineRun.wait` waits)."""
    check_state_layout(config)
    if spark is None:
        spark = build_session(
            master=config.spark.master,
            shuffle_partitions=config.spark.shuffle_partitions,
            conf=config.spark.conf,
            ui=config.spark.ui,
        )
    else:
        spark.conf.set("spark.sql.shuffle.partitions", str(config.spark.shuffle_partitions))
    if not config.available_now:
        spark.conf.set(POLLING_DELAY_CONF, f"{interval_ms(config.trigger_interval)}ms")
    source = read_changelog(spark, config)
    types = column_types(source)
    layout = resolve_layout(config, types)
    context = spark.sparkContext
    traffic = StateTraffic(
        context.accumulator(0), context.accumulator(0), context.accumulator(0), context.accumulator(0.0)
    )
    frame, decode, _time_mode = build_query_frame(config, source, layout, traffic)
    shape = SourceShape(
        config.source.format.value,
        types,
        config.source.op_column,
        config.source.order_column,
        config.primary_key,
    )
    sink = open_sink(
        config.sink.url, config.sink.table, layout.sink_columns, layout.keys.pk, changelog=config.changelog
    )
    try:
        return PipelineRun(config, frame, decode, sink, layout.columns, shape, traffic)
    except BaseException:
        sink.close()
        raise


class StopBeforeBatch(Exception):
    """Raised in ``foreachBatch`` for a batch that begins after :meth:`PipelineRun.request_stop`."""


class PipelineRun:
    """A started query: every micro-batch goes through :meth:`_apply` into the sink.

    ``batches``: what the sink saw so far; ``in_batch``: True while a batch is inside the sink
    step; ``last_batch_at``: monotonic time of the last batch (or of the start).
    """

    def __init__(
        self,
        config: PipelineConfig,
        frame: DataFrame,
        decode: Decoder,
        sink: BatchSink,
        columns: Sequence[str],
        shape: SourceShape | None = None,
        traffic: StateTraffic | None = None,
    ) -> None:
        self.config = config
        self.traffic = traffic
        self._traffic_seen = (0, 0, 0, 0.0)
        self.shape = shape or SourceShape(
            config.source.format.value,
            {},
            config.source.op_column,
            config.source.order_column,
            config.primary_key,
        )
        self.dead_letters = DeadLetters(config.dead_letters)
        self.sink = sink
        self.decode = decode
        self.columns = columns  # the source's column names, for the miss summaries
        self.batches: list[BatchProgress] = []
        self.misses = MissSummary()  # every explained miss of this run (upsertmat.spark.misses)
        self.explained = (
            config.materialize and not config.conflict.compacting and config.settings.miss_rows > 0
        )
        # Raised inside Spark's foreachBatch: reported as they are.
        self.failures: list[SinkFailure | BadInput] = []
        self.query_ids: list[str] = []
        self.started = self.last_batch_at = time.monotonic()
        self.in_batch = False
        self.stopped_early = False
        self.stop_requested = False  # request_stop(): no batch may start any more
        self.refused_batch: int | None = None
        # the driver process's CPU seconds of each batch's sink step (collect or commit), in order
        self.driver_cpu: list[float] = []
        # Written from the executors when the sink can be and every key's changes are in one task:
        # the materializer's output is partitioned by its grouping key, a raw changelog is
        # repartitioned by the sink key; the ON CONFLICT frames are applied on the driver.
        self.executor_write = os.environ.get(SINK_WRITE_VARIABLE, "executors") != "driver" and (
            not config.materialize or not config.conflict.compacting
        )
        writer = (
            frame.writeStream.foreachBatch(self._apply)
            .option("checkpointLocation", str(config.checkpoint))
            .queryName(config.query_name or f"upsertmat_{config.sink.table}")
        )
        writer = (
            writer.trigger(availableNow=True)
            if config.available_now
            else writer.trigger(processingTime="0 seconds")  # the interval is POLLING_DELAY_CONF
        )
        self.query = writer.start()

    def request_stop(self) -> None:
        """From now on no micro-batch starts: a batch that begins is refused before it reads
        anything (its offsets stay uncommitted, so the next run on the checkpoint runs it, once);
        a batch already in the sink step commits. :meth:`wait` then ends as after a stop."""
        self.stop_requested = True

    def _apply(self, batch: DataFrame, batch_id: int) -> None:
        if self.stop_requested:
            self.refused_batch = batch_id
            raise StopBeforeBatch(f"batch {batch_id} not started: the query was asked to stop")
        self.in_batch = True
        cpu = time.process_time()
        try:
            self._apply_batch(batch, batch_id)
            self.driver_cpu.append(time.process_time() - cpu)
        finally:
            self.in_batch = False
            self.last_batch_at = time.monotonic()

    def _apply_batch(self, batch: DataFrame, batch_id: int) -> None:
        config = self.config
        begin = time.monotonic()
        if not self.query_ids:
            self.query_ids.append(checkpoint_query_id(config.checkpoint))
        query_id = self.query_ids[0]
        writer = self.sink.task_writer(query_id, batch_id) if self.executor_write else None
        try:
            if writer is not None:
                if self.sink.is_committed(query_id, batch_id):  # a replay: run it, write nothing
                    writer = CountOnly()
                outputs, count, special = self._write_in_executors(batch, batch_id, writer)
                special, bad_infos = split_bad(special)
                bad_rows = self._bad_rows(batch_id, bad_infos) if bad_infos else []
                _, explained_misses = split_misses(special) if self.explained else ([], [])
                written = time.monotonic()
                outcome = self.sink.commit_written(query_id, batch_id, outputs, explained_misses)
            else:
                changes = self.decode(self._collect(batch, batch_id))
                changes, bad_infos = split_bad(changes)
                bad_rows = self._bad_rows(batch_id, bad_infos) if bad_infos else []
                changes, explained_misses = split_misses(changes) if self.explained else (changes, [])
                changes.sort(key=itemgetter(0))
                count = len(changes)
                written = time.monotonic()
                outcome = self.sink.apply_batch(
                    query_id, batch_id, [(op, row) for _, op, row in changes], explained_misses
                )
        except SinkFailure as failure:
            self.failures.append(failure)
            raise
        end = time.monotonic()
        state_calls, state_read, state_written, state_seconds = self._state_traffic()
        progress = BatchProgress(
            batch_id=batch_id,
            changes=count,
            upserts=outcome.upserts,
            deletes=outcome.deletes,
            skipped=outcome.skipped,
            sink_seconds=end - begin,
            elapsed_seconds=end - self.started,
            write_seconds=end - written,
            misses=len(explained_misses),
            miss_columns=short_columns(summarize(explained_misses), self.columns) if explained_misses else "",
            bad_rows=len(bad_rows),
            state_calls=state_calls,
            state_bytes_read=state_read,
            state_bytes_written=state_written,
            state_seconds=state_seconds,
        )
        if explained_misses and not outcome.skipped:
            summarize(explained_misses, self.misses)
        self.batches.append(progress)
        if config.progress is not None:
            config.progress(progress)

    def _state_traffic(self) -> tuple[int, int, int, float]:
        """The materializer's state access since the last batch (its tasks have ended when the
        batch is collected, so their accumulator updates are in). Zeros without accumulators."""
        if self.traffic is None:
            return (0, 0, 0, 0.0)
        now = self.traffic.values()
        before, self._traffic_seen = self._traffic_seen, now
        return (now[0] - before[0], now[1] - before[1], now[2] - before[2], now[3] - before[3])

    def _write_in_executors(
        self, batch: DataFrame, batch_id: int, writer: TaskWriter
    ) -> tuple[list[TaskOutput], int, list[Change]]:
        """:func:`~.executorwrite.write_in_executors` for this query, with :meth:`_collect`'s
        handling of a Parquet file of other column types."""
        config = self.config
        with self._parquet_mismatch_is_bad_input(batch_id):
            return write_in_executors(
                batch,
                self.decode,
                self.sink.pk,
                writer,
                self.query_ids[0],
                batch_id,
                repartition_by=() if config.materialize else config.primary_key,
            )

    def _collect(self, batch: DataFrame, batch_id: int) -> Any:
        """The batch as Arrow (this runs the batch's source, shuffle and materializer stages)."""
        with self._parquet_mismatch_is_bad_input(batch_id):
            return batch.toArrow()

    @contextmanager
    def _parquet_mismatch_is_bad_input(self, batch_id: int) -> Iterator[None]:
        """Running a batch's stages: a Parquet file whose column types differ from the declared
        ones fails the read, which is bad input naming the file and the column, not an internal
        error."""
        try:
            yield
        except Exception as error:
            found = parquet_mismatch(str(error))
            if found is None:
                raise
            failure = BadInput(batch_id, [BadRow(found[0], None, None, found[1], None)])
            self.failures.append(failure)
            raise failure from None

    def _bad_rows(self, batch_id: int, infos: list[dict[str, Any]]) -> list[BadRow]:
        """The batch's bad rows, located in their files: :class:`BadInput` (the batch is not
        committed) with ``on_error="fail"``, else written to the dead-letter directory first."""
        rows = locate(infos, self.shape)
        if self.config.source.on_error == "fail":
            failure = BadInput(batch_id, rows)
            self.failures.append(failure)
            raise failure
        self.dead_letters.write(batch_id, rows)
        return rows

    def stop(self, grace_seconds: float = 60.0) -> None:
        """Stop at a micro-batch boundary: wait (up to ``grace_seconds``) until no trigger is
        running, then stop the query. A batch still running after the grace time is interrupted;
        the sink did not commit it (or committed it whole, with its id), so the next run on the
        checkpoint runs it again and applies it exactly once."""
        deadline = time.monotonic() + grace_seconds
        while self.query.isActive and time.monotonic() < deadline:
            try:
                if not self.in_batch and not self.query.status.get("isTriggerActive", False):
                    break
            except Exception:  # the query ended while we asked
                break
            time.sleep(0.05)
        if self.query.isActive:
            self.query.stop()

    def idle(self) -> float:
        """Seconds since the last batch ended, while no batch runs (0 while one does: a long
        first batch is not idleness). O(1) plus one status call."""
        try:
            active = self.in_batch or bool(self.query.status.get("isTriggerActive", False))
        except Exception:  # the query ended while we asked
            return 0.0
        return 0.0 if active else time.monotonic() - self.last_batch_at

    def wait(
        self, stop: Callable[[], bool] | None = None, poll: float = 0.25, idle_seconds: float | None = None
    ) -> PipelineResult:
        """Wait for the query to end (input drained, timeout, ``stop()`` true or idle for
        ``idle_seconds``: then :meth:`stop`), close the sink and return what it did."""
        config = self.config
        query = self.query
        try:
            try:
                while True:
                    if query.awaitTermination(poll):  # type: ignore[arg-type]  # seconds; a float works
                        break
                    timed_out = (
                        config.timeout_seconds is not None
                        and time.monotonic() - self.started >= config.timeout_seconds
                    )
                    idle = idle_seconds is not None and self.idle() >= idle_seconds
                    if timed_out or idle or (stop is not None and stop()):
                        self.stopped_early = not (timed_out or idle)
                        self.stop()
                        break
            except Exception:
                if self.refused_batch is not None and not self.failures:  # request_stop(): a stop
                    self.stopped_early = True
                    return self._result()
                if self.failures:  # the sink failed: its own message, not Spark's wrapped traceback
                    raise self.failures[-1] from None
                raise
            finally:
                if query.isActive:
                    query.stop()
            return self._result()
        finally:
            self.sink.close()

    def _result(self) -> PipelineResult:
        """What the run did (from the sink's batches and Spark's recent progress reports)."""
        query = self.query
        reports = query.recentProgress
        input_rows = sum(int(report.get("numInputRows", 0)) for report in reports)
        timings = tuple(batch_timing(report) for report in reports if int(report.get("numInputRows", 0)))
        return PipelineResult(
            tuple(self.batches),
            input_rows,
            time.monotonic() - self.started,
            str(query.id),
            timings,
            self.misses,
        )


_PARQUET_MISMATCH = (
    # Spark 4: [FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH]
    re.compile(
        r"error while reading file (\S+?)\. Data type mismatches when reading Parquet column \[([^\]]*)\]\. "
        r"Expected Spark type (\S+?), actual Parquet type (\S+?)\."
    ),
    # Spark 3.x
    re.compile(
        r"Parquet column cannot be converted in file (\S+?)\.? "
        r"Column: \[([^\]]*)\], Expected: (\S+), Found: (\S+?)[\.\s]"
    ),
)


def parquet_mismatch(text: str) -> tuple[str, str] | None:
    """(file, reason) when Spark's error ``text`` says a Parquet column has another type than the
    declared one (None otherwise)."""
    for pattern in _PARQUET_MISMATCH:
        found = pattern.search(text)
        if found is not None:
            file, column, expected, got = found.groups()
            reason = f"column {column!r} is {got} in the file, the job declares {expected}: it cannot be read"
            return local_path(file), reason
    return None


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


def _open_config_sink(config: PipelineConfig, spark: SparkSession | None) -> BatchSink:
    spark = spark or build_session(
        master=config.spark.master, shuffle_partitions=config.spark.shuffle_partitions, conf=config.spark.conf
    )
    layout = resolve_layout(config, column_types(spark.createDataFrame([], config.source.ddl())))
    return open_sink(config.sink.url, config.sink.table, layout.sink_columns, layout.keys.pk)
