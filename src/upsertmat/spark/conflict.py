"""``ON CONFLICT DO ERROR | DO NOTHING`` as a Spark ``StatefulProcessor`` (event time).

Use with ``df.withWatermark(ts, delay).groupBy(*pk_or_bucket).transformWithState(
ConflictProcessor(spec, behavior), OUTPUT_SCHEMA, "Append", "EventTime")``. The compacting
materializer (:class:`~upsertmat.impls.conflict.CompactingMaterializer`) runs on the ``spark``
state backend, per grouping key:

- :meth:`ConflictProcessor.handleInputRows` sorts the key's rows by the arrival column, buffers
  them (rule C1; nothing is emitted) and, when the grouping key has no timer yet, registers an
  event-time timer at the current watermark + 1: it fires in the first micro-batch whose
  watermark has advanced.
- :meth:`ConflictProcessor.handleExpiredTimer` compacts every sink key of the grouping key that
  has pending changes (rules C3-C6) and emits one output row per change, ascending by context
  key. Spark runs a batch's input rows before its expired timers, so the compaction includes the
  grouping key's rows of the firing batch: in the terms of docs/spec.md section 9, each grouping
  key sees a watermark line after the rows of every batch in which its timer fires.
- Under ERROR a conflict raises :class:`~upsertmat.spec.ConflictError` in the timer: the batch
  fails (its state is not committed) and with it the query, naming the sink key and the rows;
  a restart re-runs the batch and fails again, as a Flink job would. With ``skip_conflicts``
  the key keeps its current row and the conflict is emitted as an output row with op
  ``"!C"`` whose ``row`` is the error text (for the pipeline's dead-letter output).

Late rows: Spark drops a row whose event time is at or before the watermark before the
processor sees it, and this processor relies on that: a compaction at watermark ``W`` treats
the key's changes as complete up to ``W``, so a row that arrives later would otherwise be
folded onto a value the sink already shows as final. A dropped late row is not retracted from
or added to anything; choose the watermark delay so that the upstream's disorder fits in it.

Exactly once into the sink comes from the pipeline's sink (the batch id committed in the same
transaction as the batch's changes); the state is Spark's, committed with the batch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from operator import itemgetter
from typing import Any

from pyspark.sql import DataFrame, functions
from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from ..impls.conflict import CompactingMaterializer
from ..impls.conflict.materializer import CURRENT, DIRTY, META, PENDING
from ..impls.settings import Backend, Settings
from ..impls.state.spark import SparkBackend
from ..spec import Change, ConflictBehavior, RowKind
from .packing import BUCKET, key_bucket
from .processor import KEY_STRUCT, OUTPUT_SCHEMA, VALUE_STRUCT, ProcessorSpec, split_bad_records
from .sources.badinput import BAD_OP

__all__ = ["CONFLICT_OP", "OUTPUT_SCHEMA", "ConflictProcessor", "build_conflict_frame"]

CONFLICT_OP = "!C"
"""The op of an output row that reports a skipped conflict (``row`` holds the message)."""
_OUTPUT_ROW = SparkRow("arrival", "op", "row")
_KINDS = {kind.value: kind for kind in RowKind}
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class ConflictProcessor(StatefulProcessor):
    """Row-API processor of the compacting behaviours (see the module docstring).

    Per grouping key and batch: one state read of each state touched (the adapter's cache),
    O(rows) buffering, one flush; per fired timer O(pending) compaction. Output rows carry
    ``arrival`` = the watermark at which they were compacted.
    """

    def __init__(
        self, spec: ProcessorSpec, behavior: ConflictBehavior, *, skip_conflicts: bool = False
    ) -> None:
        if not behavior.compacting:
            raise ValueError("ConflictProcessor runs ERROR and NOTHING; DEDUPLICATE is MaterializerProcessor")
        if spec.packed:
            raise ValueError("ConflictProcessor reads typed columns or row_json, not packed rows")
        self.spec = spec
        self.behavior = behavior
        self.skip_conflicts = skip_conflicts

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._backend = SparkBackend(
            handle, blob=self.spec.blob_state, key_schema=KEY_STRUCT, value_schema=VALUE_STRUCT
        )
        # Register the state variables with Spark (only allowed in init; reading is not, so no
        # materializer is built here: its constructor reads the dirty index).
        for name in (CURRENT, DIRTY, META):
            self._backend.value_state(name)
        self._backend.map_state(PENDING)

    def _materializer(self) -> CompactingMaterializer:
        materializer = CompactingMaterializer(self.spec.keys, self._backend, self.behavior)
        materializer.skip_conflicts = self.skip_conflicts
        return materializer

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[SparkRow]:
        """Buffer the key's rows in arrival order; arm the watermark timer. Emits only the rows
        that cannot be changes (``BAD_OP``, upsertmat.spark.sources.badinput)."""
        records = list(rows)
        reported: list[SparkRow] = []
        if records:
            fields = records[0].__fields__
            arrival, op = fields.index(self.spec.arrival), fields.index(self.spec.op)
            row_of = self.spec.row_reader(fields)
            materializer = self._materializer()
            good, bad = split_bad_records(list(map(tuple, records)), arrival, op)
            for record in sorted(good, key=itemgetter(arrival)):
                materializer.process(Change(_KINDS[record[op]], row_of(record)))
            # Rows that cannot be changes are reported at once, not buffered.
            reported = [_OUTPUT_ROW(at, BAD_OP, info) for at, info in bad]
            if good and not list(self._handle.listTimers()):
                self._handle.registerTimer(max(timerValues.getCurrentWatermarkInMs(), 0) + 1)
        self._backend.flush()
        return iter(reported)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[SparkRow]:
        """The watermark advanced: compact the grouping key's pending sink keys and emit."""
        materializer = self._materializer()
        emitted = materializer.finish()  # ConflictError under ERROR: the batch (and query) fails
        self._backend.flush()
        at = timerValues.getCurrentWatermarkInMs()
        out = [_OUTPUT_ROW(at, change.kind.value, _ENCODER.encode(list(change.row))) for change in emitted]
        out += [_OUTPUT_ROW(at, CONFLICT_OP, conflict.describe()) for conflict in materializer.conflicts]
        return iter(out)

    def close(self) -> None:
        self._backend.close()


EVENT_TIME = "_upsertmat_event_time"
"""The timestamp column the watermark is defined on (the ``ts`` column, ms, as a timestamp)."""


def build_conflict_frame(config: Any, source: DataFrame, layout: Any) -> tuple[DataFrame, Any, str]:
    """The pipeline's query frame under ``config.conflict`` = ERROR or NOTHING (the pipeline's hook).

    ``config`` is a :class:`~.config.PipelineConfig` and ``layout`` its resolved layout (typed as
    Any to keep this module free of the pipeline's imports). The source gets a watermark of
    ``config.watermark_delay`` on ``config.source.ts_column`` (a config under ERROR or NOTHING has one:
    :func:`~.config.check_config`); rows are grouped
    by the sink key or by key bucket as for DEDUPLICATE (typed columns; no packed input), and run
    through :class:`ConflictProcessor` in event-time mode. Returns ``(frame, None, time mode)``
    (the pipeline decodes with its own ``materialized_changes``). Under ERROR a conflict fails the query.
    """
    spec = ProcessorSpec(
        keys=layout.keys,
        settings=Settings(backend=Backend.SPARK, conflict=config.conflict),
        columns=layout.columns,
        op=config.source.op_column,
        arrival=config.source.order_column,
        ts=config.source.ts_column,
        blob_state=config.spark.key_buckets is not None,
    )
    source = source.withColumn(EVENT_TIME, functions.timestamp_millis(functions.col(config.source.ts_column)))
    source = source.withWatermark(EVENT_TIME, config.watermark_delay)
    if config.spark.key_buckets is None:
        grouped = source.groupBy(*config.primary_key)
    else:
        grouped = source.withColumn(BUCKET, key_bucket(config.primary_key, config.spark.key_buckets)).groupBy(
            BUCKET
        )
    frame = grouped.transformWithState(
        ConflictProcessor(spec, config.conflict), OUTPUT_SCHEMA, "Append", "EventTime"
    )

    return frame, None, "EventTime"
