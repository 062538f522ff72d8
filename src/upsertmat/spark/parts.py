"""The parts a pipeline is made of: its source, its sink and how Spark runs.

A job file (:class:`upsertmat.jobs.model.JobSpec`) and a pipeline run
(:class:`~upsertmat.spark.config.PipelineConfig`) hold the same part objects: a job becomes a
run by handing them over (:func:`upsertmat.jobs.runner.pipeline_config`), never by copying
their fields. The parts live here, below ``jobs/``, so that ``spark/`` imports nothing above
it. No pyspark import: jobs are loaded, compiled and explained without PySpark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..impls.state.spark import INLINE_MAX
from ..sinks import SinkKind, kind_of
from ..sinks.sqlite import sqlite_path
from .sources.formats import SourceFormat

__all__ = ["COLUMN_TYPES", "INTERNAL_URL", "Column", "SinkSpec", "SourceSpec", "SparkOptions"]


# Column types a job may declare, and their Spark SQL DDL spelling.
COLUMN_TYPES: dict[str, str] = {
    "string": "STRING",
    "long": "BIGINT",
    "bigint": "BIGINT",
    "int": "INT",
    "integer": "INT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
}


@dataclass(frozen=True)
class Column:
    """One data column of the changelog rows: its name and type. Job files declare a key of
    :data:`COLUMN_TYPES` (the job loader refuses any other); a pipeline built in Python may name
    any other Spark SQL type (``timestamp``), which its DDL spells as given."""

    name: str
    type: str

    @property
    def ddl_type(self) -> str:
        """The Spark SQL type name (``BIGINT`` for ``long``; another type upper-cased)."""
        return COLUMN_TYPES.get(self.type, self.type.upper())


@dataclass(frozen=True)
class SourceSpec:
    """A changelog in files: one change per record.

    ``path``: a directory watched as a stream (new files must appear atomically, e.g. written
    elsewhere then renamed in) in ``format``, a member of the table of formats
    (:mod:`upsertmat.spark.sources.formats`). ``columns`` are the row's data columns in order
    (the sink table's columns); ``op_column`` holds ``+I -U +U -D`` and ``order_column`` the
    arrival order (an integer that increases along the changelog; the materializer applies the
    events of one key in it); a CDC format fills both from its envelopes (docs/plans.md).
    ``ts_column``: an event timestamp (ms) passed to the strategy and, under ``ON CONFLICT``
    ERROR or NOTHING, the watermark's column (job files declare none). ``on_error``: ``fail``
    stops at a row that cannot be a change, ``skip`` writes it to ``dead_letter`` (None: the
    checkpoint's ``dead-letter`` directory) and goes on.

    A record's fields are :meth:`ddl`'s, in its order (op, order, ts, data columns): by name for
    JSON Lines, Parquet and the CDC formats, by position for CSV (whose header line is skipped).
    """

    path: Path
    format: SourceFormat
    columns: tuple[Column, ...]
    op_column: str = "op"
    order_column: str = "seq"
    on_error: str = "fail"
    dead_letter: Path | None = None
    ts_column: str | None = None

    @property
    def column_names(self) -> tuple[str, ...]:
        """The data columns' names, in row order."""
        return tuple(column.name for column in self.columns)

    def ddl(self) -> str:
        """Spark DDL of a source record: op, order, the ts column if any, then the data columns.
        The one place a source's DDL is built (the pipeline's readers and sink take it from here)."""
        fields = [f"`{self.op_column}` STRING", f"`{self.order_column}` BIGINT"]
        if self.ts_column is not None:
            fields.append(f"`{self.ts_column}` BIGINT")
        fields += [f"`{column.name}` {column.ddl_type}" for column in self.columns]
        return ", ".join(fields)


INTERNAL_URL = "internal:"
"""The sink URL of a ``sink: {internal: true}`` job until the client gives it its database."""


@dataclass(frozen=True)
class SinkSpec:
    """An upsert sink: a sink URL (any kind of :data:`upsertmat.sinks.KINDS`: a SQLite path or
    ``sqlite:///…``, ``postgresql://…``, ``delta:///…``, ``iceberg:///…``,
    ``iceberg+catalog:NAME``, ``paimon:///…``) and a table, created if missing with the primary
    key as its key. Each sink records the batch ids it committed in the same transaction as the
    rows (the SQL sinks in ``_upsertmat_batches``, keyed by ``table``; the lakehouse sinks in
    their commit metadata), so a replayed batch is skipped.

    ``internal``: the result is kept inside the client (an embedded SQLite database in its
    session directory, or under the gateway's data root) instead of a user's database.
    """

    url: str
    table: str
    internal: bool = False

    @property
    def kind(self) -> SinkKind:
        """The URL's sink kind (:func:`upsertmat.sinks.kind_of`; SinkUrlError for none)."""
        return kind_of(self.url)

    def local_path(self) -> Path | None:
        """The local file or directory the sink writes (None: a database server, a named catalog,
        or an internal sink before a client gives it its database)."""
        if self.url == INTERNAL_URL:
            return None
        return self.kind.local_path(self.url)

    def sqlite_path(self) -> Path:
        """The SQLite database file of a SQLite URL (SinkUrlError, a ValueError, for another kind)."""
        if self.url == INTERNAL_URL:
            raise ValueError("the internal sink has no database until a client runs the job")
        return sqlite_path(self.url)


@dataclass(frozen=True)
class SparkOptions:
    """How Spark runs: the master, the state partitions and the shape of the state.

    ``master``: the Spark master the pipeline starts its session on when it starts one
    (``local[2]``, ``spark://host:7077``...; the checkpoint, source and sink must then be
    reachable from every executor). ``shuffle_partitions``: the number of state partitions,
    pinned in the checkpoint (Spark refuses to change it later). ``max_files_per_trigger``
    bounds a micro-batch (None: everything available at once).

    ``key_buckets``: None groups state by the sink PK (one Spark grouping key per sink key);
    ``n`` groups it by ``pmod(xxhash64(pk), n)`` instead — state stays keyed by the sink PK
    inside each bucket, events of each key still apply in arrival order, outputs are identical,
    but Spark's per-grouping-key cost (about 0.3 ms per key per batch, the dominant cost) is paid
    per bucket. Buckets emit only the last change per sink key of a batch (what the sink keeps,
    as one msgpack output row per bucket), and, when every column is an integer, double, boolean
    or string, pack each source Arrow batch's changes per bucket before the shuffle
    (``upsertmat.spark.packing``; docs/spark.md). Pinned in the checkpoint too.
    ``state_layout``: with key buckets, how a bucket's state is laid out: ``log`` (appended
    changes read through a machine-local copy: a batch costs what it touches) or ``blob`` (one
    blob per bucket, read and rewritten whole by each batch touching it); docs/spark.md, "State
    at table scale". ``state_inline_bytes``: with the ``log`` layout, a bucket's state whose
    stored entries take at most this many bytes is kept whole in its head instead (two state
    calls per batch, no log, no local copy; 0: every state as a log); not pinned (both forms
    read under any bound).

    ``ui``: start the Spark UI (off by default; on 127.0.0.1 for a local master). ``conf``: more
    Spark settings for the session the pipeline starts (e.g. ``spark.executor.memory``; job
    files set none).
    """

    master: str = "local[2]"
    shuffle_partitions: int = 2
    max_files_per_trigger: int | None = None
    key_buckets: int | None = None
    state_layout: str = "log"
    state_inline_bytes: int = INLINE_MAX
    ui: bool = False
    conf: dict[str, str] = field(default_factory=dict)
