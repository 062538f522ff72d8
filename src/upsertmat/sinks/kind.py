"""A kind of sink: everything upsertmat does with a sink URL, behind one interface.

A :class:`SinkKind` knows its URLs (which it claims, how a relative one resolves, which local
file or directory it names), opens a :class:`~.base.BatchSink` on it, reads its committed
results back (a snapshot pinned to one batch, the committed changes, the last batch and
position), drops a table with its bookkeeping, and runs its documented maintenance. The table
of kinds (:mod:`upsertmat.sinks.registry`) chooses one by URL scheme; no other module switches
on a kind.

A kind's module imports its client library (``deltalake``, ``pyiceberg``, ``psycopg``) only
inside the methods that need it, so parsing and checking URLs works without the extra installed.
No pyspark import.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from .base import BatchSink, Column
from .reading import TableChange, TableSnapshot


class SinkUrlError(ValueError):
    """A sink URL that names no sink upsertmat can write."""


class SinkKind(ABC):
    """One kind of sink (see the module). Instances are stateless: one per kind, in the table."""

    name: ClassVar[str]
    """The kind's name (``sqlite``, ``postgresql``, ``delta``, ``iceberg``, ``paimon``): what
    ``bench --pipeline-sink`` and ``explain-plan`` call it."""
    forms: ClassVar[tuple[str, ...]]
    """The URL forms it takes, for messages (``"postgresql://…"``)."""
    records_misses: ClassVar[bool] = False
    """True: the explained misses of a batch are stored in the sink with it (``_upsertmat_misses``)."""
    commit_note: ClassVar[str] = "batch ids committed in the same transaction"
    """How a batch id is committed with the batch (``explain-plan``)."""
    local: ClassVar[bool] = True
    """True: the sink can be a file or directory (:meth:`url_in`); False: it lives on a server."""
    location_is_table: ClassVar[bool] = False
    """True: the URL's location holds exactly one table, whatever the table name says (a Delta
    table directory); False: the name picks a table in it (a database, a warehouse)."""
    table_format: ClassVar[bool] = False
    """True: the table is the files of an open table format that other engines read
    (:meth:`scan` and :meth:`data_files` work; its writes are priced per file rewritten)."""

    @abstractmethod
    def claims(self, url: str) -> bool:
        """True when ``url`` is this kind's (its scheme); the URL may still be malformed
        (:meth:`check` says). O(1)."""

    def check(self, url: str) -> None:
        """SinkUrlError unless ``url`` is a well-formed URL of this kind. O(len(url))."""
        self.local_path(url)

    @abstractmethod
    def resolve(self, url: str, base: Path) -> str:
        """``url`` with a relative file or directory made absolute against ``base``; SinkUrlError
        if malformed. O(len(url))."""

    @abstractmethod
    def local_path(self, url: str, base: Path | None = None) -> Path | None:
        """The local file or directory the sink writes (relative ones joined to ``base``, default
        left relative), or None for a database server or a named catalog. SinkUrlError if
        malformed."""

    @abstractmethod
    def url_in(self, directory: Path, name: str) -> str:
        """The URL of a new sink called ``name`` inside ``directory`` (benchmarks, tests)."""

    @abstractmethod
    def open(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> BatchSink:
        """The sink writing ``table`` of ``url`` (created if missing), keyed by the column indexes
        ``pk``; ``changelog``: record every committed batch's table changes so :meth:`changes`
        can read them. SinkError if it cannot be opened."""

    @abstractmethod
    def snapshot(self, url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
        """The table as the last committed batch left it, read at ONE committed version (never a
        half-applied batch): that batch's id, the first ``limit`` rows by primary key (``pk``:
        its column names; ``[]``: the ones the table recorded), the row count and the changelog
        position. :data:`~.reading.NO_TABLE` when nothing is committed. SinkError if unreadable."""

    @abstractmethod
    def changes(
        self, url: str, table: str, after: int, limit: int, upto: int | None = None
    ) -> list[TableChange]:
        """The committed changes of ``table`` at positions ``after < pos [<= upto]``, in order, at
        most ``limit``. SinkError if unreadable."""

    def last_batch(self, url: str, table: str) -> int | None:
        """The greatest batch id committed for ``table`` (None: none yet, or unreadable)."""
        from .base import SinkError

        try:
            return self.snapshot(url, table, (), 0).batch_id
        except SinkError:
            return None

    def last_position(self, url: str, table: str) -> int:
        """The changelog position of the last committed change of ``table`` (0: none)."""
        return self.snapshot(url, table, (), 0).changes_pos

    @abstractmethod
    def drop(self, url: str, table: str) -> None:
        """Remove ``table`` with everything recorded for it (batch ids, changes, misses; for a
        lakehouse table its files), so a job writing it again starts from nothing. Nothing to do
        for a table that does not exist. SinkError if it cannot be dropped."""

    def maintain(self, url: str, table: str, *, retention_hours: float | None = None) -> dict[str, Any]:
        """The kind's documented maintenance of a sink table (compaction, expiry; docs/spark.md),
        returning what it did; nothing for kinds that need none. ``retention_hours``: files that
        earlier versions used are deleted once removed longer ago than this (None: the kind's
        default; readers pinned to an older version then fail)."""
        return {}

    def scan(self, url: str, table: str) -> Any:
        """The whole current table as an Arrow table, read by the table format's own reader (no
        ordering, no Python rows): what a downstream reader pays. SinkError for kinds that are not
        table formats (the SQL databases)."""
        from .base import SinkError

        raise SinkError(f"a {self.name} sink is read through its database, not scanned")

    def data_files(self, url: str, table: str) -> int | None:
        """The data files the table's current version reads (None: not a table format)."""
        return None
