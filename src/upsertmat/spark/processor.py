"""The materializer as a Spark ``StatefulProcessor`` keyed by the sink primary key.

Use with ``df.groupBy(*pk_columns).transformWithState(processor, OUTPUT_SCHEMA, "Append",
time_mode)``. Per grouping key and micro-batch, :meth:`MaterializerProcessor.handleInputRows`
sorts the key's rows by the arrival-order column (Spark gives no order inside a batch), feeds
them one by one to the strategy (running on :class:`~upsertmat.impls.state.spark.SparkBackend`),
flushes the buffered state writes once, and returns one output row per emitted change:
``arrival`` (the input's arrival value), ``op`` (``+I``/``+U``/``-D``) and ``row`` (the row as a
JSON array, so JSON types stay exact: ``1``, ``1.0`` and ``true`` differ); with
``ProcessorSpec.batched_output``, one row per grouping key and batch carrying msgpack instead.

Rows come from typed columns (``ProcessorSpec.columns``: their values in order), from one
column holding the row as a JSON array (``ProcessorSpec.row_json``), or packed many to an input
row by :mod:`upsertmat.spark.packing` (``ProcessorSpec.packed``). The processor object is
pickled by reference to this module and shipped to the Python workers, which must be able to
import upsertmat (it is installed; ``PYSPARK_PYTHON`` is the driver's interpreter).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any

import msgpack
from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import BinaryType, StructField, StructType

from ..impls.settings import Backend, Settings, Strategy
from ..impls.state.base import StateBackend
from ..impls.state.codec import decode_seq
from ..impls.state.spark import INLINE_MAX, SparkBackend
from ..impls.strategies.adaptive import AdaptiveMaterializer
from ..impls.strategies.common import changes_of_records
from ..impls.strategies.legacy import LegacyMaterializer
from ..impls.strategies.linked_map import MapMaterializer
from ..impls.strategies.value import ValueMaterializer
from ..spec import Change, Keys, Materializer, RowKind
from ..spec.changes import Row
from .config import PIPELINE_STRATEGIES
from .misses import EXPIRED_STATE, decode_expired, encode_expired, expiry_note_ttl, miss_outputs
from .packing import PACKED, unpack_records
from .sources.badinput import BAD_OP

OUTPUT_SCHEMA = "arrival LONG, op STRING, row STRING"
# ProcessorSpec.batched_output: one row per grouping key and batch, its changes in msgpack.
BATCHED_OUTPUT_SCHEMA = "arrival LONG, op STRING, changes BINARY"
# Row classes with fixed fields: building rows positionally costs about half of Row(**kwargs).
_OUTPUT_ROW = SparkRow("arrival", "op", "row")
_BATCHED_ROW = SparkRow("arrival", "op", "changes")
_PACK = msgpack.Packer(use_bin_type=True, autoreset=True).pack
_KINDS = {kind.value: kind for kind in RowKind}
# One reused encoder: json.dumps with non-default options builds a new one per call.
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))
# The op of an output row carrying a grouping key's whole batch (ProcessorSpec.batched_output).
BATCH_OP = "*"
TIMERS = "ttl_timers"  # the strategies' TTL timer index (impls/strategies/timers.py)
# The state schemas of upsertmat.impls.state.spark (KEY_SCHEMA, VALUE_SCHEMA) as StructTypes: given
# as DDL strings, pyspark has the JVM parse each one twice per registered state and task.
KEY_STRUCT = StructType([StructField("k", BinaryType(), True)])
VALUE_STRUCT = StructType([StructField("v", BinaryType(), True)])


def run_many(materializer: Materializer, changes: list[Change]) -> list[Change | None]:
    """The materializer's outputs for ``changes`` in order: its ``process_many`` fast path when
    it has one (one call for the key's batch), else ``process`` per change."""
    many: Callable[[list[Change]], list[Change | None]] | None = getattr(materializer, "process_many", None)
    if many is not None:
        return many(changes)
    process = materializer.process
    return [process(change) for change in changes]


def build_materializer(keys: Keys, settings: Settings, backend: StateBackend) -> Materializer:
    """The strategy ``settings.strategy`` on an already open ``backend`` (here: a SparkBackend).

    ValueError for SORTED (Spark's map state has no ordered seek) or TTL settings the strategy
    refuses.
    """
    if settings.backend is not Backend.SPARK:  # the pipeline's already are: no copy per key and batch
        settings = replace(settings, backend=Backend.SPARK)
    if settings.strategy is Strategy.VALUE:
        return ValueMaterializer(keys, backend, settings)
    if settings.strategy is Strategy.MAP:
        return MapMaterializer(keys, backend, settings)
    if settings.strategy is Strategy.ADAPTIVE:
        return AdaptiveMaterializer(keys, backend, settings)
    if settings.strategy is Strategy.LEGACY:
        return LegacyMaterializer(keys, backend, settings)
    names = ", ".join(strategy.value for strategy in PIPELINE_STRATEGIES)
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
    ``packed``: the input rows carry one column, :data:`PACKED`, a msgpack array of records
    (:mod:`upsertmat.spark.packing`: many changes per input row, packed per key bucket before
    the shuffle), each ``[arrival, op, ts (if set), *columns]`` (:meth:`packed_fields`);
    pyspark converts every input row and cell separately (~5 µs a row), so a few rows holding
    many changes are far cheaper than one row per change. Only for columns msgpack carries
    exactly (integers, floats, booleans, strings, nulls: ``packing.PACKABLE_TYPES``).
    ``batched_output`` (with ``last_per_key``): a grouping key emits at most ONE output row per
    batch (schema :data:`BATCHED_OUTPUT_SCHEMA`), op :data:`BATCH_OP`, whose ``changes`` is a
    msgpack array of its changes as ``[arrival, op, row]`` triples (exact for integers, floats
    including NaN, booleans, strings and nulls; ``pipeline.materialized_changes`` reads it):
    pyspark converts every output row and cell separately on the way to Arrow and back on the
    driver, so one blob per key bucket is far cheaper than one row per sink key. Needs
    ``last_per_key`` (each sink key at most once per batch, so the order between the triples of
    different keys does not matter to the sink).
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
    batched_output: bool = False
    traffic: StateTraffic | None = None
    log_scope: str | None = None
    """With ``blob_state``: keep each state as a log in Spark read through a machine-local copy
    (:class:`~upsertmat.impls.state.spark.LogSparkMap`: a batch costs what it touches) instead
    of one blob per bucket; the scope names the query's copies (its checkpoint)."""
    log_home: str | None = None
    """Where the machine-local copy lives (None: under the temporary directory, per scope;
    :func:`~upsertmat.impls.state.spark_cache.cache_directory`)."""
    log_inline_max: int = INLINE_MAX
    """With ``log_scope``: a state of at most this many stored bytes is kept whole in its head
    (two calls per batch, no copy), a larger one as the log."""

    def packed_fields(self) -> list[str]:
        """The names of a packed record's values, in order (arrival, op, ts if set, columns)."""
        return [self.arrival, self.op, *([self.ts] if self.ts is not None else []), *self.columns]

    def __post_init__(self) -> None:
        if self.batched_output and not self.last_per_key:
            raise ValueError("batched_output needs last_per_key")
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


@dataclass(frozen=True)
class StateTraffic:
    """Spark accumulators the processors add their state access to, after every grouping key:
    calls to the JVM state server, bytes read and written (as stored), seconds in state access
    (:meth:`SparkBackend.traffic <upsertmat.impls.state.spark.SparkBackend.traffic>`). The
    driver reads them after each micro-batch (:class:`~.config.BatchProgress`)."""

    calls: Any
    bytes_read: Any
    bytes_written: Any
    seconds: Any

    def values(self) -> tuple[int, int, int, float]:
        """The totals so far (driver only)."""
        return (int(self.calls.value), int(self.bytes_read.value), int(self.bytes_written.value),
                float(self.seconds.value))  # fmt: skip


def split_bad_records(
    records: list[tuple[Any, ...]], arrival: int, op: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, str]]]:
    """(records that are changes, ``(arrival, description JSON)`` of those that are not): a record
    whose op is not ``+I -U +U -D`` is a bad source row (its op is a
    :data:`~upsertmat.spark.sources.badinput.BAD_OP` marker). One pass when every op is good."""
    kinds = _KINDS
    if all(record[op] in kinds for record in records):
        return records, []
    good = [record for record in records if record[op] in kinds]
    bad = []
    for record in records:
        text = record[op]
        if text not in kinds:
            info = text[len(BAD_OP) :] if isinstance(text, str) and text.startswith(BAD_OP) else None
            if info is None:
                info = _ENCODER.encode({"code": "unknown-op", "op": text})
            bad.append((record[arrival], info))
    return good, bad


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
        self._backend = SparkBackend(
            handle,
            blob=self.spec.blob_state,
            key_schema=KEY_STRUCT,
            value_schema=VALUE_STRUCT,
            log_scope=self.spec.log_scope if self.spec.blob_state else None,
            log_home=self.spec.log_home,
            inline_max=self.spec.log_inline_max,
        )
        self._ttl = self.spec.settings.ttl.enabled
        # Building one strategy here registers its state variables with Spark (only allowed in init).
        build_materializer(self.spec.keys, self.spec.settings, self._backend)
        if self._ttl:
            self._timers = self._backend.sorted_map_state(TIMERS)
        self._reported = (0, 0, 0, 0.0)
        # Rule-7 explanations (upsertmat.spark.misses); with TTL, the keys whose rows expired.
        self._explain = self.spec.settings.miss_rows > 0
        self._expired_notes: Any = None
        if self._ttl and self._explain:
            self._expired_notes = handle.getValueState(
                EXPIRED_STATE, VALUE_STRUCT, ttlDurationMs=expiry_note_ttl(self.spec.settings.ttl.ttl_ms)
            )

    def _materializer(self, now: int) -> Materializer:
        materializer = build_materializer(self.spec.keys, self.spec.settings, self._backend)
        recorder = getattr(materializer, "miss_recorder", None)
        if recorder is not None and self._expired_notes is not None:
            recorder.fallback = self._expired_on_record
        if now >= 0:
            materializer.advance_time(now)
        return materializer

    def _expired_on_record(self, context: bytes) -> int:
        """Expiry removals of ``context`` kept from earlier batches (read on a miss only)."""
        stored = self._expired_notes.get()
        return decode_expired(None if stored is None else stored[0]).get(context, 0)

    def _keep_expired(self, materializer: Materializer) -> None:
        """Add the expiries this strategy object noted to the grouping key's kept notes (only
        when it noted some: a batch or timer that expired rows)."""
        recorder = getattr(materializer, "miss_recorder", None)
        noted = {} if recorder is None or self._expired_notes is None else recorder.noted()
        if noted:
            stored = self._expired_notes.get()
            notes = decode_expired(None if stored is None else stored[0])
            for context, count in noted.items():
                notes[context] = notes.get(context, 0) + count
            self._expired_notes.update((encode_expired(notes),))

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[SparkRow]:
        self._backend.begin(_PACK(list(key)))
        first = next(rows, None)
        now = timerValues.getCurrentProcessingTimeInMs()
        if first is None:
            outputs = self._apply(now, [], [])
        elif self.spec.packed:
            position = first.__fields__.index(PACKED)
            blobs = [first[position]]
            blobs.extend(record[position] for record in rows)
            outputs = self._apply(now, *self._packed_changes(blobs))
        else:
            outputs = self._apply(now, *self._row_changes(first, rows))
        make = _BATCHED_ROW if self.spec.batched_output else _OUTPUT_ROW
        return iter([make(*output) for output in outputs])

    def _apply(
        self, now: int, arrivals: list[int], changes: list[Change], bad: list[tuple[Any, str]] | None = None
    ) -> list[tuple[int, str, Any]]:
        """Run the key's changes (sorted by arrival) and flush: the output ``(arrival, op, text)``s
        (``(arrival, BATCH_OP, msgpack bytes)`` with ``batched_output``). ``bad``: the key's rows
        that cannot be changes, ``(arrival, description JSON)``, passed through as ``BAD_OP``
        outputs without touching state (upsertmat.spark.sources.badinput)."""
        materializer = self._materializer(now)
        outputs: list[tuple[int, str, Any]] = []
        if changes:
            emitted = run_many(materializer, changes)
            encode = _ENCODER.encode
            if self.spec.last_per_key:
                # Keyed like the sink's own reduction (upsertmat.sinks.last_per_key).
                pk = self.spec.keys.pk
                last: dict[Any, tuple[int, Change]] = {}
                if len(pk) == 1:  # the column's value groups as its 1-tuple would
                    column = pk[0]
                    for at, change in zip(arrivals, emitted, strict=True):
                        if change is not None:
                            last[change.row[column]] = (at, change)
                else:
                    for at, change in zip(arrivals, emitted, strict=True):
                        if change is not None:
                            row = change.row
                            last[tuple([row[index] for index in pk])] = (at, change)
                if self.spec.batched_output:
                    if last:
                        # ``_value_``: the member's own attribute (``.value`` is a descriptor call).
                        triples = [(at, change.kind._value_, change.row) for at, change in last.values()]
                        outputs = [(arrivals[0], BATCH_OP, _PACK(triples))]
                else:
                    outputs = [
                        (at, change.kind._value_, encode(list(change.row))) for at, change in last.values()
                    ]
            else:
                outputs = [
                    (at, change.kind._value_, encode(list(change.row)))
                    for at, change in zip(arrivals, emitted, strict=True)
                    if change is not None
                ]
            if self._explain:
                outputs += miss_outputs(materializer, arrivals, changes, self.spec.batched_output)
        if bad:
            batched = self.spec.batched_output
            outputs += [(at, BAD_OP, _PACK(info) if batched else info) for at, info in bad]
        self._keep_expired(materializer)
        self._finish()
        return outputs

    def _packed_changes(self, blobs: list[bytes]) -> tuple[list[int], list[Change], list[tuple[Any, str]]]:
        """(arrivals, changes, bad rows) of packed input blobs (:data:`PACKED`), sorted by arrival.
        O(records log records); a record's row is a slice of the decoded tuple."""
        records, bad = split_bad_records(unpack_records(blobs), 0, 1)
        records.sort(key=itemgetter(0))
        kinds, start = _KINDS, 2 if self.spec.ts is None else 3
        bulk = self.spec.bulk_read_rows
        if bulk is not None and len(records) >= bulk:
            self._backend.bulk_reads(True)
        changes = changes_of_records(records, kinds, start == 3)
        return [record[0] for record in records], changes, bad

    def _row_changes(
        self, first: Any, rows: Iterator[Any]
    ) -> tuple[list[int], list[Change], list[tuple[Any, str]]]:
        """(arrivals, changes, bad rows) of typed input rows, sorted by arrival."""
        # Index plain tuples by position: Row.__getitem__ is a Python-level override (and a
        # by-name lookup a field search), tuple indexing is C.
        records = [tuple(first)]
        records.extend(map(tuple, rows))
        return self._sorted_changes(records, first.__fields__)

    def _sorted_changes(
        self, records: list[tuple[Any, ...]], fields: list[str]
    ) -> tuple[list[int], list[Change], list[tuple[Any, str]]]:
        spec = self.spec
        arrival, op = fields.index(spec.arrival), fields.index(spec.op)
        records, bad = split_bad_records(records, arrival, op)
        bulk = spec.bulk_read_rows
        if bulk is not None and len(records) >= bulk:
            self._backend.bulk_reads(True)
        ts = None if spec.ts is None else fields.index(spec.ts)
        row_of = spec.row_reader(fields)
        records.sort(key=itemgetter(arrival))
        kinds = _KINDS
        if ts is None:
            changes = [Change(kinds[record[op]], row_of(record), None) for record in records]
        else:
            changes = [Change(kinds[record[op]], row_of(record), record[ts]) for record in records]
        return [record[arrival] for record in records], changes, bad

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[SparkRow]:
        """A cleanup timer fired: expire the key's due elements (emits nothing)."""
        self._backend.begin(_PACK(list(key)))
        self._keep_expired(self._materializer(timerValues.getCurrentProcessingTimeInMs()))
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
        traffic = self.spec.traffic
        if traffic is not None:
            now = self._backend.traffic()
            before, self._reported = self._reported, now
            traffic.calls.add(now[0] - before[0])
            traffic.bytes_read.add(now[1] - before[1])
            traffic.bytes_written.add(now[2] - before[2])
            traffic.seconds.add(now[3] - before[3])

    def close(self) -> None:
        self._backend.close()
