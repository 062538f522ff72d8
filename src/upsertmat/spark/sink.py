"""Upsert sinks with exactly-once micro-batches: SQLite (embedded) and PostgreSQL.

:meth:`UpsertSink.apply_batch` applies one micro-batch in ONE database transaction that also
records ``(query_id, batch_id)`` in ``_upsertmat_batches``; a batch id already recorded is
skipped. Spark re-runs a micro-batch after a restart only if its commit did not reach the
checkpoint, and it re-runs it with the same id and the same input, so each batch takes effect
exactly once (``docs/spark.md``).

A batch is a list of changes in arrival order: ``+I``/``+U`` upsert the row, ``-U``/``-D``
delete the row's primary key. Inside one transaction only the last change of each primary key
is visible, so the sink reduces the batch to that change per key and writes with
``executemany``: O(changes) Python work and one statement per surviving key.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack

from ..spec.changes import Row

BATCHES_TABLE = "_upsertmat_batches"
CHANGES_TABLE = "_upsertmat_changes"
"""The committed table changes of sinks opened with ``changelog=True``, in chunks: ``(sink_table,
first_pos, batch_id, count, changes)`` where ``changes`` is a msgpack array of ``[op, row]``
pairs (values exact: integers, floats with NaN and -0.0, booleans, text, null) at positions
``first_pos .. first_pos + count - 1``; positions count 1, 2, ... per table. A chunk holds at
most :data:`CHANGES_PER_CHUNK` changes of one batch: one row per chunk instead of one per change
makes recording a 20,000-key batch about 3x cheaper."""
CHANGES_PER_CHUNK = 1000
MISSES_TABLE = "_upsertmat_misses"  # upsertmat.spark.misses: one row per explained miss
SQL_TYPES = {
    "bigint": "BIGINT",
    "int": "BIGINT",
    "double": "DOUBLE PRECISION",
    "boolean": "BOOLEAN",
    "string": "TEXT",
}


class SinkError(RuntimeError):
    """The sink cannot be opened or written (bad URL, unsupported column type, SQL error)."""


class SinkFailure(SinkError):
    """The sink database failed while a micro-batch was written (see ``UpsertSink.apply_batch``)."""


@dataclass(frozen=True)
class Column:
    """A sink column: its name and Spark simple type name (``bigint``, ``double``, ``string``...)."""

    name: str
    spark_type: str

    @property
    def sql_type(self) -> str:
        try:
            return SQL_TYPES[self.spark_type]
        except KeyError:
            raise SinkError(
                f"column {self.name!r} has type {self.spark_type}; the sink supports {sorted(SQL_TYPES)}"
            ) from None


@dataclass(frozen=True)
class BatchOutcome:
    """What :meth:`UpsertSink.apply_batch` did."""

    upserts: int
    deletes: int
    skipped: bool


def quote(name: str) -> str:
    """A quoted SQL identifier (SQLite and PostgreSQL)."""
    return '"' + name.replace('"', '""') + '"'


def last_per_key(changes: Sequence[tuple[str, Row]], pk: Sequence[int]) -> tuple[list[Row], list[Row]]:
    """(rows to upsert, PK tuples to delete): the last change of every primary key wins. O(n)."""
    if len(pk) == 1:  # keyed by the value itself: it groups as its 1-tuple would, without building one
        column = pk[0]
        single: dict[Any, tuple[str, Row]] = {}
        for op, row in changes:
            single[row[column]] = (op, row)
        upserts = [row for op, row in single.values() if op in ("+I", "+U")]
        deletes: list[Row] = [(key,) for key, (op, _) in single.items() if op in ("-U", "-D")]
        return upserts, deletes
    final: dict[tuple[Any, ...], tuple[str, Row]] = {}
    for op, row in changes:
        final[tuple(row[column] for column in pk)] = (op, row)
    upserts = [row for op, row in final.values() if op in ("+I", "+U")]
    deletes = [key for key, (op, _) in final.items() if op in ("-U", "-D")]
    return upserts, deletes


class BatchSink(ABC):
    """Where the pipeline commits its micro-batches, each exactly once (SQL databases here; Delta
    Lake and Iceberg tables in :mod:`.delta` and :mod:`.iceberg`)."""

    table: str
    where: str = "the sink"

    @abstractmethod
    def apply_batch(
        self,
        query_id: str,
        batch_id: int,
        changes: Sequence[tuple[str, Row]],
        misses: Sequence[tuple[int, str]] = (),
    ) -> BatchOutcome:
        """Apply ``changes`` (arrival order) as batch ``batch_id`` of query ``query_id``, atomically;
        a batch already committed is skipped (``BatchOutcome.skipped``)."""

    def failure(self, batch_id: int, error: BaseException, hint: str = "") -> SinkFailure:
        """The :class:`SinkFailure` of a batch the sink could not commit: the sink, the batch, the
        error, that every earlier batch is committed, and what to do (``hint``: "free space")."""
        fix = f"Fix the sink ({hint})" if hint else "Fix the sink"
        return SinkFailure(
            f"{self.where} failed on micro-batch {batch_id}: {type(error).__name__}: {str(error).strip()}; "
            f"every batch before it is committed and this one is not. {fix} and run the job again: "
            "it continues at this batch, each batch applied once"
        )

    @abstractmethod
    def rows(self) -> list[Row]:
        """Every row of the table, ordered by primary key (for checks and the demo)."""

    @abstractmethod
    def committed_batches(self) -> int:
        """How many batches are recorded as committed."""

    @abstractmethod
    def close(self) -> None: ...


class UpsertSink(BatchSink):
    """A SQL table keyed by ``pk`` (column indexes into ``columns``) plus the batch bookkeeping."""

    paramstyle = "?"
    blob_type = "BLOB"

    def __init__(
        self, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> None:
        if not pk:
            raise SinkError("the sink table needs a primary key")
        self.table = table
        self.columns = tuple(columns)
        self.pk = tuple(pk)
        names = [quote(column.name) for column in self.columns]
        keys = [names[index] for index in self.pk]
        marks = ", ".join([self.paramstyle] * len(names))
        others = [name for index, name in enumerate(names) if index not in self.pk]
        update = ", ".join(f"{name} = excluded.{name}" for name in others)
        conflict = f"DO UPDATE SET {update}" if others else "DO NOTHING"
        self.upsert_sql = (
            f"INSERT INTO {quote(table)} ({', '.join(names)}) VALUES ({marks}) "
            f"ON CONFLICT ({', '.join(keys)}) {conflict}"
        )
        where = " AND ".join(f"{key} = {self.paramstyle}" for key in keys)
        self.delete_sql = f"DELETE FROM {quote(table)} WHERE {where}"
        self.create_sql = [
            f"CREATE TABLE IF NOT EXISTS {quote(table)} ("
            + ", ".join(f"{quote(c.name)} {c.sql_type}" for c in self.columns)
            + f", PRIMARY KEY ({', '.join(keys)}))",
            f"CREATE TABLE IF NOT EXISTS {BATCHES_TABLE} (query_id TEXT NOT NULL, batch_id BIGINT NOT NULL, "
            "sink_table TEXT NOT NULL, changes BIGINT NOT NULL, PRIMARY KEY (query_id, batch_id))",
        ]
        # Created by the first batch that has a miss to record, inside its transaction.
        self.create_misses_sql = (
            f"CREATE TABLE IF NOT EXISTS {MISSES_TABLE} (query_id TEXT NOT NULL, batch_id BIGINT NOT NULL, "
            "sink_table TEXT NOT NULL, arrival BIGINT NOT NULL, op TEXT NOT NULL, row_json TEXT NOT NULL, "
            "sink_key TEXT NOT NULL, cause TEXT NOT NULL, explanation TEXT NOT NULL)"
        )
        mark = self.paramstyle
        self.seen_sql = f"SELECT 1 FROM {BATCHES_TABLE} WHERE query_id = {mark} AND batch_id = {mark}"
        self.mark_sql = f"INSERT INTO {BATCHES_TABLE} VALUES ({', '.join([self.paramstyle] * 4)})"
        self.miss_sql = f"INSERT INTO {MISSES_TABLE} VALUES ({', '.join([self.paramstyle] * 9)})"
        self.changelog = changelog
        if changelog:
            self.create_sql.append(
                f"CREATE TABLE IF NOT EXISTS {CHANGES_TABLE} (sink_table TEXT NOT NULL, "
                "first_pos BIGINT NOT NULL, batch_id BIGINT NOT NULL, count BIGINT NOT NULL, "
                f"changes {self.blob_type} NOT NULL, "
                "PRIMARY KEY (sink_table, first_pos))"
            )
        self.last_pos_sql = (
            f"SELECT max(first_pos + count - 1) FROM {CHANGES_TABLE} WHERE sink_table = {mark}"
        )
        self.change_sql = f"INSERT INTO {CHANGES_TABLE} VALUES ({', '.join([mark] * 5)})"

    def record_changes(
        self, cursor: Any, query_id: str, batch_id: int, upserts: list[Row], deletes: list[Row]
    ) -> None:
        """Inside the batch's transaction, before it writes: append the table changes the batch
        makes to :data:`CHANGES_TABLE` (nothing unless opened with ``changelog=True``).

        Per touched key, from its row before the batch (one primary-key lookup) to its row after:
        absent -> row ``+I``; row -> a different row ``-U`` old, ``+U`` new; row -> absent ``-D``
        old; unchanged: nothing. Deletes first, then upserts, each in the batch's key order.
        O(touched keys) lookups.
        """
        if not self.changelog:
            return
        changes: list[tuple[str, Row]] = []
        upsert_keys = [tuple(row[index] for index in self.pk) for row in upserts]
        befores = self.rows_before(cursor, [tuple(key) for key in deletes] + upsert_keys)
        for key in deletes:
            before = befores.get(tuple(key))
            if before is not None:
                changes.append(("-D", before))
        for key, row in zip(upsert_keys, upserts, strict=True):
            before = befores.get(key)
            if before is None:
                changes.append(("+I", tuple(row)))
            elif before != tuple(row):
                changes += [("-U", before), ("+U", tuple(row))]
        if not changes:
            return
        cursor.execute(self.last_pos_sql, (self.table,))
        last = cursor.fetchone()
        start = 1 + (int(last[0]) if last is not None and last[0] is not None else 0)
        chunks = []
        for offset in range(0, len(changes), CHANGES_PER_CHUNK):
            part = changes[offset : offset + CHANGES_PER_CHUNK]
            chunks.append((self.table, start + offset, batch_id, len(part), msgpack.packb(part)))
        cursor.executemany(self.change_sql, chunks)

    LOOKUP_CHUNK = 400  # keys per lookup statement (SQLite allows 32,766 parameters, PostgreSQL 65,535)

    def rows_before(self, cursor: Any, keys: Sequence[Row]) -> dict[Row, Row]:
        """The current rows of ``keys`` (primary-key tuples), by key, ``LOOKUP_CHUNK`` keys per
        statement (a row-value ``IN (VALUES ...)``): on SQLite about half the time of one
        statement per key (20,000 keys: 30-50 against 46-78 ms), on PostgreSQL one round trip
        per 400 keys instead of one per key."""
        width = len(self.pk)
        names = ", ".join(quote(column.name) for column in self.columns)
        key_names = ", ".join(quote(self.columns[index].name) for index in self.pk)
        one = "(" + ", ".join([self.paramstyle] * width) + ")"
        found: dict[Row, Row] = {}
        for start in range(0, len(keys), self.LOOKUP_CHUNK):
            chunk = keys[start : start + self.LOOKUP_CHUNK]
            cursor.execute(
                f"SELECT {names} FROM {quote(self.table)} WHERE ({key_names}) IN "
                f"(VALUES {', '.join([one] * len(chunk))})",
                [value for key in chunk for value in key],
            )
            for row in cursor.fetchall():
                found[tuple(row[index] for index in self.pk)] = tuple(row)
        return found

    errors: tuple[type[BaseException], ...] = ()
    """The database driver's error classes: what :meth:`apply_batch` reports as a SinkFailure."""

    def apply_batch(
        self,
        query_id: str,
        batch_id: int,
        changes: Sequence[tuple[str, Row]],
        misses: Sequence[tuple[int, str]] = (),
    ) -> BatchOutcome:
        """Apply ``changes`` (arrival order) and record the batch, atomically; skip a recorded batch.

        ``misses``: the batch's explained misses, ``(arrival, explanation JSON)``
        (:mod:`upsertmat.spark.misses`), written to :data:`MISSES_TABLE` in the same transaction
        (the table is created by the first batch that has one).

        A database that fails (unreachable, full, read-only) is a :class:`SinkFailure` naming the
        sink and the batch: nothing of the batch is applied, every earlier batch stays committed.
        """
        upserts, deletes = last_per_key(changes, self.pk)
        explained = [self._miss_record(query_id, batch_id, arrival, text) for arrival, text in misses]
        try:
            return self._transaction(query_id, batch_id, len(changes), upserts, deletes, explained)
        except self.errors as error:
            raise self.failure(batch_id, error, "free space, start the database") from error

    def _miss_record(self, query_id: str, batch_id: int, arrival: int, text: str) -> tuple[Any, ...]:
        """A :data:`MISSES_TABLE` row: the batch, the retraction, its sink key, cause, explanation."""
        data = json.loads(text)
        row, key = json.dumps(data["row"], ensure_ascii=False), json.dumps(data["key"], ensure_ascii=False)
        return (query_id, batch_id, self.table, arrival, data["op"], row, key, data["cause"], text)

    @abstractmethod
    def _transaction(
        self,
        query_id: str,
        batch_id: int,
        changes: int,
        upserts: list[Row],
        deletes: list[Row],
        misses: list[tuple[Any, ...]],
    ) -> BatchOutcome: ...

    def _select_all(self) -> str:
        order = ", ".join(quote(self.columns[index].name) for index in self.pk)
        names = ", ".join(quote(column.name) for column in self.columns)
        return f"SELECT {names} FROM {quote(self.table)} ORDER BY {order}"


class SqliteSink(UpsertSink):
    """SQLite file; each batch is one ``BEGIN IMMEDIATE`` transaction.

    Durability: WAL journal with ``synchronous=FULL``, so a committed batch (its rows and its
    batch id) survives a crash of the process and of the machine; a WAL commit is one append
    and one fsync of the log, not a rewrite of the table's pages. The table is created
    ``WITHOUT ROWID`` (clustered on the primary key): an upsert or delete touches one B-tree
    instead of a rowid table plus a primary-key index. A 64 MiB page cache keeps the touched
    part of a large table in memory between batches.
    """

    errors = (sqlite3.Error,)

    def __init__(
        self, path: Path, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> None:
        super().__init__(table, columns, pk, changelog=changelog)
        self.where = f"the SQLite sink {path}"
        self.create_sql[0] += " WITHOUT ROWID"
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA cache_size=-65536")
        for statement in self.create_sql:
            self._db.execute(statement)

    def _transaction(
        self,
        query_id: str,
        batch_id: int,
        changes: int,
        upserts: list[Row],
        deletes: list[Row],
        misses: list[tuple[Any, ...]],
    ) -> BatchOutcome:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            if db.execute(self.seen_sql, (query_id, batch_id)).fetchone() is not None:
                db.execute("ROLLBACK")
                return BatchOutcome(0, 0, skipped=True)
            self.record_changes(db.cursor(), query_id, batch_id, upserts, deletes)
            db.executemany(self.delete_sql, deletes)
            db.executemany(self.upsert_sql, upserts)
            if misses:
                db.execute(self.create_misses_sql)
                db.executemany(self.miss_sql, misses)
            db.execute(self.mark_sql, (query_id, batch_id, self.table, changes))
            db.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already (a full disk)
                db.execute("ROLLBACK")
            raise
        return BatchOutcome(len(upserts), len(deletes), skipped=False)

    def rows(self) -> list[Row]:
        return [tuple(row) for row in self._db.execute(self._select_all())]

    def committed_batches(self) -> int:
        return int(self._db.execute(f"SELECT count(*) FROM {BATCHES_TABLE}").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class PostgresSink(UpsertSink):
    """PostgreSQL through psycopg 3 (autocommit connection); each batch is one transaction.

    The batch row's primary key makes a concurrent second writer of the same batch fail
    instead of applying it twice.
    """

    paramstyle = "%s"
    blob_type = "BYTEA"

    def __init__(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> None:
        super().__init__(table, columns, pk, changelog=changelog)
        import psycopg

        self.errors = (psycopg.Error,)
        self.where = f"the PostgreSQL sink {_without_password(url)}"
        # autocommit: every transaction() block below is a real transaction, not a savepoint.
        self._db = psycopg.connect(url, autocommit=True)
        with self._db.transaction():
            for statement in self.create_sql:
                self._db.execute(statement)

    def _transaction(
        self,
        query_id: str,
        batch_id: int,
        changes: int,
        upserts: list[Row],
        deletes: list[Row],
        misses: list[tuple[Any, ...]],
    ) -> BatchOutcome:
        with self._db.transaction(), self._db.cursor() as cursor:
            cursor.execute(self.seen_sql + " FOR UPDATE", (query_id, batch_id))
            if cursor.fetchone() is not None:
                return BatchOutcome(0, 0, skipped=True)
            self.record_changes(cursor, query_id, batch_id, upserts, deletes)
            if deletes:
                cursor.executemany(self.delete_sql, deletes)
            if upserts:
                cursor.executemany(self.upsert_sql, upserts)
            if misses:
                cursor.execute(self.create_misses_sql)
                cursor.executemany(self.miss_sql, misses)
            cursor.execute(self.mark_sql, (query_id, batch_id, self.table, changes))
        return BatchOutcome(len(upserts), len(deletes), skipped=False)

    def rows(self) -> list[Row]:
        return [tuple(row) for row in self._db.execute(self._select_all()).fetchall()]

    def committed_batches(self) -> int:
        row = self._db.execute(f"SELECT count(*) FROM {BATCHES_TABLE}").fetchone()
        return 0 if row is None else int(row[0])

    def close(self) -> None:
        self._db.close()


def _without_password(url: str) -> str:
    """``url`` for messages: a password in it is replaced by ``***``."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"
