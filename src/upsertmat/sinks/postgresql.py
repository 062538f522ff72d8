"""The PostgreSQL sink (``postgresql://…``, ``postgres://…``), through psycopg 3 (the ``spark`` extra)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..spec.changes import Row
from .base import Column, SinkError
from .sql import BATCHES_TABLE, SqlKind, UpsertSink

PREFIXES = ("postgresql://", "postgres://")
FILLFACTOR = 90
"""The storage parameter ``fillfactor`` of a sink table the sink creates: inserts fill each heap
page to 90 %, so an upsert of an existing key finds room on its row's page and is a HOT update
(no new index entry, the index pages untouched). At the default 100 the first update of each row
of a full page moves the row to another page and inserts an index entry, and every page those
writes touch first after a checkpoint costs a full-page image in the WAL. At 10,000,000 rows,
50,000 random upserts per batch wrote 305-499 MB of WAL at fillfactor 100, nearly all of it
37,000-62,000 full-page images, and 176-279 MB at 90 with every update HOT; the transaction's
time changed within its spread; the table takes 11 % more heap, 9 % more with its index
(docs/spark.md, *PostgreSQL at table scale*). A table the sink
finds already there keeps its own setting."""


def without_password(url: str) -> str:
    """``url`` for messages: a password in it is replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"


class PostgresSink(UpsertSink):
    """PostgreSQL through psycopg 3 (autocommit connection); each batch is one transaction.

    The batch-id check locks the batch's row (``FOR UPDATE``) and the batch row's primary key
    makes a concurrent second writer of the same batch fail instead of applying it twice.
    """

    paramstyle = "%s"
    blob_type = "BYTEA"
    lock_suffix = " FOR UPDATE"

    def __init__(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> None:
        super().__init__(table, columns, pk, changelog=changelog)
        self.create_sql[0] += f" WITH (fillfactor = {FILLFACTOR})"
        import psycopg

        self.errors = (psycopg.Error,)
        self.where = f"the PostgreSQL sink {without_password(url)}"
        # autocommit: every transaction() block below is a real transaction, not a savepoint.
        self._db = psycopg.connect(url, autocommit=True)
        with self._db.transaction():
            for statement in self.create_sql:
                self._db.execute(statement)
        found = self._db.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "AND table_schema = current_schema() ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        try:
            self.check_columns([str(row[0]) for row in found])
        except SinkError:
            self._db.close()
            raise

    @contextlib.contextmanager
    def _begin(self) -> Iterator[Any]:
        with self._db.transaction(), self._db.cursor() as cursor:
            yield cursor

    def rows(self) -> list[Row]:
        return [tuple(row) for row in self._db.execute(self._select_all()).fetchall()]

    def committed_batches(self) -> int:
        row = self._db.execute(f"SELECT count(*) FROM {BATCHES_TABLE}").fetchone()
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        self._db.close()


class PostgresKind(SqlKind):
    """A PostgreSQL database server: no local path."""

    name = "postgresql"
    forms = ("postgresql://…",)
    local = False
    mark = "%s"
    repeatable_read = "BEGIN ISOLATION LEVEL REPEATABLE READ"

    def claims(self, url: str) -> bool:
        return url.startswith(PREFIXES)

    def check(self, url: str) -> None:
        pass

    def resolve(self, url: str, base: Path) -> str:
        return url

    def local_path(self, url: str, base: Path | None = None) -> Path | None:
        return None

    def url_in(self, directory: Path, name: str) -> str:
        raise SinkError("a PostgreSQL sink lives on a server, not in a directory")

    def open(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> PostgresSink:
        return PostgresSink(url, table, columns, pk, changelog=changelog)

    def _connect(self, url: str) -> Any:
        import psycopg

        try:
            return psycopg.connect(url, autocommit=True)
        except psycopg.Error as error:
            raise SinkError(f"cannot read the sink: {type(error).__name__}: {error}") from None

    def _reader(self, url: str) -> Any | None:
        return self._connect(url)

    def _writer(self, url: str) -> Any | None:
        return self._connect(url)

    def _tables(self, connection: Any) -> set[str]:
        found = connection.execute("SELECT table_name FROM information_schema.tables").fetchall()
        return {str(row[0]) for row in found}

    def _errors(self) -> tuple[type[BaseException], ...]:
        import psycopg

        return (psycopg.Error,)
