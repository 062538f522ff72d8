"""The resolved description of a pipeline job: source, keys, sink, checkpoint, settings.

A :class:`JobSpec` is what a job file (``upsertmat/jobs/loader.py``) and a compiled plan
(``upsertmat/plan``) both resolve to, after every configuration layer has been applied. It
holds no Spark objects, so loading, validating and compiling a job never starts a JVM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..impls.settings import Settings
from ..sinks import SinkKind, kind_of
from ..sinks.sqlite import sqlite_path
from ..spark.sources.formats import SourceFormat

__all__ = ["COLUMN_TYPES", "Column", "JobSpec", "SinkSpec", "SourceFormat", "SourceSpec", "SparkOptions"]


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
    """One data column of the changelog rows: its name and type (a key of :data:`COLUMN_TYPES`)."""

    name: str
    type: str

    @property
    def ddl_type(self) -> str:
        """The Spark SQL type name (``BIGINT`` for ``long``)."""
        return COLUMN_TYPES[self.type]


@dataclass(frozen=True)
class SourceSpec:
    """A changelog in files: one change per record.

    ``columns`` are the row's data columns in order; ``op_column`` holds ``+I -U +U -D`` and
    ``order_column`` the arrival order (an integer that increases along the changelog); a CDC
    format fills both from its envelopes (docs/plans.md). ``on_error``: ``fail`` stops at a row
    that cannot be a change, ``skip`` writes it to ``dead_letter`` (None: the checkpoint's
    ``dead-letter`` directory) and goes on.
    """

    path: Path
    format: SourceFormat
    columns: tuple[Column, ...]
    op_column: str = "op"
    order_column: str = "seq"
    on_error: str = "fail"
    dead_letter: Path | None = None

    @property
    def column_names(self) -> tuple[str, ...]:
        """The data columns' names, in row order."""
        return tuple(column.name for column in self.columns)

    def ddl(self) -> str:
        """Spark DDL of a source record: op, order, then the data columns."""
        fields = [f"`{self.op_column}` STRING", f"`{self.order_column}` BIGINT"]
        fields += [f"`{column.name}` {column.ddl_type}" for column in self.columns]
        return ", ".join(fields)


INTERNAL_URL = "internal:"
"""The sink URL of a ``sink: {internal: true}`` job until the client gives it its database."""


@dataclass(frozen=True)
class SinkSpec:
    """An upsert sink: a sink URL (any kind of :data:`upsertmat.sinks.KINDS`: a SQLite path or
    ``sqlite:///…``, ``postgresql://…``, ``delta:///…``, ``iceberg:///…``,
    ``iceberg+catalog:NAME``, ``paimon:///…``) and a table.

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
    """How the local Spark runs: the master and the number of state partitions.

    ``shuffle_partitions`` is pinned in the checkpoint (Spark refuses to change it later);
    ``max_files_per_trigger`` bounds a micro-batch (None: everything available at once).
    ``key_buckets``: None groups state by the sink PK; ``n`` groups it into ``n`` hash buckets
    of sink keys (``PipelineConfig.key_buckets``; pinned in the checkpoint too).
    ``state_layout``: with key buckets, ``log`` or ``blob`` (``PipelineConfig.state_layout``).
    ``ui``: start the Spark UI (off by default; on 127.0.0.1 for a local master).
    """

    master: str = "local[2]"
    shuffle_partitions: int = 2
    max_files_per_trigger: int | None = None
    key_buckets: int | None = None
    state_layout: str = "log"
    ui: bool = False


@dataclass(frozen=True)
class JobSpec:
    """A fully resolved job. ``materialize=False`` writes the raw changelog to the sink (no materializer)."""

    name: str
    source: SourceSpec
    sink: SinkSpec
    primary_key: tuple[str, ...]
    upsert_key: tuple[str, ...]
    checkpoint: Path
    settings: Settings
    materialize: bool = True
    spark: SparkOptions = field(default_factory=SparkOptions)
    config: dict[str, str] = field(default_factory=dict)
    """The resolved configuration keys (Flink names) as display strings, for plans and reports."""

    def pk_indexes(self) -> tuple[int, ...]:
        """Column indexes of the sink primary key in the row."""
        names = self.source.column_names
        return tuple(names.index(name) for name in self.primary_key)

    def upsert_key_indexes(self) -> tuple[int, ...]:
        """Column indexes of the upsert key in the row (``()`` for none)."""
        names = self.source.column_names
        return tuple(names.index(name) for name in self.upsert_key)
