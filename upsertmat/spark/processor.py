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
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from ..impls.settings import Backend, Settings, Strategy
from ..impls.state.base import StateBackend
from ..impls.state.spark import SparkBackend
from ..spec import Change, Keys, Materializer, RowKind
from ..spec.changes import Row

OUTPUT_SCHEMA = "arrival LONG, op STRING, row STRING"
SPARK_STRATEGIES = (Strategy.VALUE, Strategy.MAP, Strategy.ADAPTIVE, Strategy.LEGACY)


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
        if settings.ttl.enabled:
            raise ValueError("LEGACY on spark does not implement state TTL; set table.exec.state.ttl to 0")
        return LegacyMaterializer(keys, backend)
    names = ", ".join(strategy.value for strategy in SPARK_STRATEGIES)
    raise ValueError(f"strategy {settings.strategy.value} does not run on spark; use one of {names}")


@dataclass(frozen=True)
class ProcessorSpec:
    """How the processor reads its input rows and which materializer it runs.

    ``keys``: column indexes into the row (sink PK, upsert key). ``columns``: the typed input
    columns forming the row, in order; or ``row_json``: the column holding the row as a JSON
    array (exactly one of the two). ``op`` / ``arrival`` / ``ts``: column names (``ts`` optional).
    """

    keys: Keys
    settings: Settings
    columns: tuple[str, ...] = ()
    row_json: str | None = None
    op: str = "op"
    arrival: str = "seq"
    ts: str | None = None

    def __post_init__(self) -> None:
        if bool(self.columns) == (self.row_json is not None):
            raise ValueError("give exactly one of columns (typed row columns) and row_json")

    def row_of(self, record: Any) -> Row:
        """The changelog row of one input record."""
        if self.row_json is not None:
            return tuple(json.loads(record[self.row_json]))
        return tuple(record[column] for column in self.columns)


class MaterializerProcessor(StatefulProcessor):
    """Row-API (``transformWithState``) processor running one strategy per grouping key.

    Per key and batch: O(events) strategy work, state round trips as the strategy's accesses to
    distinct entries (reads once, writes once, thanks to the adapter's cache), one flush.
    """

    def __init__(self, spec: ProcessorSpec) -> None:
        self.spec = spec

    def init(self, handle: StatefulProcessorHandle) -> None:
        self._backend = SparkBackend(handle)
        self._materializer = build_materializer(self.spec.keys, self.spec.settings, self._backend)

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[SparkRow]:
        spec = self.spec
        events = sorted(rows, key=lambda record: record[spec.arrival])
        now = timerValues.getCurrentProcessingTimeInMs()
        if now >= 0:
            self._materializer.advance_time(now)
        out: list[SparkRow] = []
        for record in events:
            ts = None if spec.ts is None else record[spec.ts]
            change = Change(RowKind.parse(record[spec.op]), spec.row_of(record), ts)
            emitted = self._materializer.process(change)
            if emitted is not None:
                out.append(
                    SparkRow(
                        arrival=record[spec.arrival],
                        op=emitted.kind.value,
                        row=json.dumps(list(emitted.row), ensure_ascii=False, allow_nan=False),
                    )
                )
        self._backend.flush()
        return iter(out)

    def close(self) -> None:
        self._materializer.close()
