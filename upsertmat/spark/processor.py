"""The materializer as a Spark ``StatefulProcessor`` keyed by the sink primary key.

Use with ``df.groupBy(*pk_columns).transformWithState(processor, OUTPUT_SCHEMA, "Append",
time_mode)``. Per grouping key and micro-batch, :meth:`MaterializerProcessor.handleInputRows`
sorts the key's rows by the arrival-order column (Spark gives no order inside a batch), feeds
them one by one to the strategy (running on :class:`~upsertmat.impls.state.spark.SparkBackend`),
flushes the buffered state writes once, and returns one output row per emitted change:
``arrival`` (the input's arrival value), ``op`` (``+I``/``+U``/``-D``) and ``row`` (the row as a
JSON array, so JSON types stay exact: ``1``, ``1.0`` and ``true`` differ).

Rows come either from typed columns (``ProcessorSpec.columns``: their values in order) or from
one column holding the row as a JSON array (``ProcessorSpec.row_json``). The processor object is
pickled by reference to this module and shipped to the Python workers, which must be able to
import upsertmat (it is installed; ``PYSPARK_PYTHON`` is the driver's interpreter).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from ..impls.registry import PIPELINE_ONLY
from ..impls.settings import Backend, Settings, Strategy
from ..impls.state.base import StateBackend
from ..impls.state.codec import decode_seq
from ..impls.state.spark import SparkBackend
from ..spec import Change, Keys, Materializer, RowKind
from ..spec.changes import Row

OUTPUT_SCHEMA = "arrival LONG, op STRING, row STRING"
# A Row class with fixed fields: building rows positionally costs about half of Row(**kwargs).
_OUTPUT_ROW = SparkRow("arrival", "op", "row")
_KINDS = {kind.value: kind for kind in RowKind}
# One reused encoder: json.dumps with non-default options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
SPARK_STRATEGIES = tuple(strategy for strategy, backend in PIPELINE_ONLY if backend is Backend.SPARK)
PACKED = "_upsertmat_packed"  # the input column of ProcessorSpec.packed
TIMERS = "ttl_timers"  # the strategies' TTL timer index (upsertmat/impls/strategies/timers.py)


def build_materializer(keys: Keys, settings: Settings, backend: StateBackend) -> Materializer:
    """The strategy ``settings.strategy`` on an already open ``backend`` (here: a SparkBackend).

    ValueError for SORTED (Spark's map state has no ordered seek) or TTL settings the strategy
    refuses.
    """
    from ..impls.legacy import LegacyMaterializer
    from ..impls.strategies.adaptive import AdaptiveMaterializer
    from ..impls.strategies.linked_map import MapMaterializer
    from ..impls.strategies.value import ValueMaterializer

    settings = replace(settings, backend=Backend.SPARK)
    if settings.strategy is Strategy.VALUE:
        return ValueMaterializer(keys, backend, settings)
    if settings.strategy is Strategy.MAP:
        return MapMaterializer(keys, backend, settings)
    if settings.strategy is Strategy.ADAPTIVE:
        return AdaptiveMaterializer(keys, backend, settings)
    if settings.strategy is Strategy.LEGACY:
        return LegacyMaterializer(keys, backend, settings)
    names = ", ".join(strategy.value for strategy in SPARK_STRATEGIES)
    raise ValueError(f"strategy {settings.strategy.value} does not run on spark; use one of {names}")


@dataclass(frozen=True)
class ProcessorSpec:
    """How the processor reads its input rows and which materializer it runs.

    ``keys``: column indexes into the row (sink PK, upsert key). ``columns``: the typed input
    columns forming the row, in order; or ``row_json``: the column holding the row as a JSON
    array (exactly one of the two). ``op`` / ``arrival`` / ``ts``: column names (``ts`` optional).
    ``bulk_read_rows``: a grouping key with at least this many rows in a batch loads each state
    it touches whole, in one streamed call, instead of one call per entry (meant for key buckets,
    whose batches touch many of their entries; None: never). The pipeline's key buckets use
    ``blob_state`` instead, which also makes the writes one call. ``last_per_key``: emit only the
    last change of each sink primary key per grouping key and batch (in arrival order the
    outputs that reach an upsert sink applying a batch in one transaction, where only the last
    change of a key is visible: the table ends up the same, with far fewer rows to ship).
    ``blob_state``: each state of a grouping key is one Spark ``ValueState`` blob holding all
    its entries (:class:`~upsertmat.impls.state.spark.BlobSparkMap`: one read and one write per
    grouping key and batch; for key buckets) instead of a ``MapState`` of entries.
    ``packed``: the input rows carry one column, :data:`PACKED`, a JSON object whose values
    are, in order, ``arrival``, ``op``, ``ts`` (if set) and ``columns`` (:func:`packed_fields`);
    pyspark converts every input cell separately (~2 µs each), so one text column parsed with
    ``json.loads`` is cheaper than five typed ones. Only for columns whose JSON form is exact
    (integers, booleans, strings: no floating point, whose NaN Spark writes as a string).
    """

    keys: Keys
    settings: Settings
    columns: tuple[str, ...] = ()
    row_json: str | None = None
    op: str = "op"
    arrival: str = "seq"
    ts: str | None = None
    bulk_read_rows: int | None = None
    last_per_key: bool = False
    packed: bool = False
    blob_state: bool = False

    def packed_fields(self) -> list[str]:
        """The names of a packed record's values, in order (arrival, op, ts if set, columns)."""
        return [self.arrival, self.op, *([self.ts] if self.ts is not None else []), *self.columns]

    def __post_init__(self) -> None:
        if bool(self.columns) == (self.row_json is not None):
            raise ValueError("give exactly one of columns (typed row columns) and row_json")
        if self.packed and not self.columns:
            raise ValueError("packed rows need the row's columns")

    def row_reader(self, fields: list[str]) -> Callable[[Any], Row]:
        """``record -> row`` for records whose field names are ``fields`` (by position, fast)."""
        if self.row_json is not None:
            position = fields.index(self.row_json)
            return lambda record: tuple(json.loads(record[position]))
        positions = [fields.index(column) for column in self.columns]
        if len(positions) == 1:
            only = positions[0]
            return lambda record: (record[only],)
        pick = itemgetter(*positions)
        return lambda record: tuple(pick(record))


class MaterializerProcessor(StatefulProcessor):
    """Row-API (``transformWithState``) processor running one strategy per grouping key.

    Per key and batch: a fresh strategy object on the shared :class:`SparkBackend` (so its clock
    and TTL expiry start from this key's state), O(events) strategy work, state round trips as
    the strategy's accesses to distinct entries (each read once, each written once, thanks to
    the adapter's cache), one flush.

    TTL (processing time; ``timeMode="ProcessingTime"``): the clock is the batch timestamp. The
    key's due elements expire before its events are applied, exactly as if the clock had been
    advanced for every key; a Spark processing-time timer at the key's earliest expiry removes
    the expired state of keys that receive no more input (in the next data batch when no-data
    batches are off). Expiry emits nothing, so outputs do not depend on when cleanup runs.
    """

    def __init__(self, spec: ProcessorSpec) -> None:
        self.spec = spec

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._handle = handle
        self._backend = SparkBackend(handle, blob=self.spec.blob_state)
        self._ttl = self.spec.settings.ttl.enabled
        # Building one strategy here registers its state variables with Spark (only allowed in init).
        build_materializer(self.spec.keys, self.spec.settings, self._backend)
        if self._ttl:
            self._timers = self._backend.sorted_map_state(TIMERS)

    def _materializer(self, now: int) -> Materializer:
        materializer = build_materializer(self.spec.keys, self.spec.settings, self._backend)
        if now >= 0:
            materializer.advance_time(now)
        return materializer

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[SparkRow]:
        first = next(rows, None)
        materializer = self._materializer(timerValues.getCurrentProcessingTimeInMs())
        out: list[SparkRow] = []
        if first is not None:
            # Index plain tuples by position: Row.__getitem__ is a Python-level override (and a
            # by-name lookup a field search), tuple indexing is C.
            if self.spec.packed:
                fields = self.spec.packed_fields()
                position = first.__fields__.index(PACKED)
                loads = json.loads
                records = [tuple(loads(first[position]).values())]
                records.extend(tuple(loads(record[position]).values()) for record in rows)
            else:
                fields = first.__fields__
                records = [tuple(first)]
                records.extend(map(tuple, rows))
            bulk = self.spec.bulk_read_rows
            if bulk is not None and len(records) >= bulk:
                self._backend.bulk_reads(True)
            arrival, op = fields.index(self.spec.arrival), fields.index(self.spec.op)
            ts = None if self.spec.ts is None else fields.index(self.spec.ts)
            row_of = self.spec.row_reader(fields)
            records.sort(key=itemgetter(arrival))
            process = materializer.process
            encode = _ENCODER.encode
            if self.spec.last_per_key:
                # Keyed like the sink's own reduction (upsertmat.spark.sink.last_per_key).
                pk = self.spec.keys.pk
                last: dict[tuple[Any, ...], tuple[int, Change]] = {}
                for record in records:
                    change = Change(_KINDS[record[op]], row_of(record), None if ts is None else record[ts])
                    emitted = process(change)
                    if emitted is not None:
                        row = emitted.row
                        last[tuple([row[index] for index in pk])] = (record[arrival], emitted)
                out = [
                    _OUTPUT_ROW(at, emitted.kind.value, encode(list(emitted.row)))
                    for at, emitted in last.values()
                ]
            else:
                append = out.append
                for record in records:
                    change = Change(_KINDS[record[op]], row_of(record), None if ts is None else record[ts])
                    emitted = process(change)
                    if emitted is not None:
                        append(_OUTPUT_ROW(record[arrival], emitted.kind.value, encode(list(emitted.row))))
        self._finish()
        return iter(out)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[SparkRow]:
        """A cleanup timer fired: expire the key's due elements (emits nothing)."""
        self._materializer(timerValues.getCurrentProcessingTimeInMs())
        self._finish()
        return iter([])

    def _finish(self) -> None:
        """Re-arm the key's cleanup timer (TTL only), then flush the buffered state writes."""
        if self._ttl:
            first = self._timers.first(b"")
            for timer in list(self._handle.listTimers()):
                self._handle.deleteTimer(timer)
            if first is not None:
                self._handle.registerTimer(decode_seq(first[0][:8]))
        self._backend.flush()

    def close(self) -> None:
        self._backend.close()
