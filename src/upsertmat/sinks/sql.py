"""What the SQL sinks (SQLite, PostgreSQL) share: the upsert statements, the batch bookkeeping,
the recorded changes, and the readers of the committed results.

Writing (:class:`UpsertSink`): one micro-batch is ONE database transaction that applies its last
change per primary key (``executemany`` of one ``DELETE`` and one ``INSERT ... ON CONFLICT DO
UPDATE``: one statement per surviving key) and records ``(query_id, batch_id)`` in
:data:`BATCHES_TABLE`; a batch id already recorded is skipped. With ``changelog=True`` the same
transaction appends the table changes the batch makes to :data:`CHANGES_TABLE`; explained misses
go to :data:`MISSES_TABLE`.

Reading (:class:`SqlKind`): one *read* transaction sees the table exactly as some committed batch
left it, and that batch is the greatest id recorded for the table: SQLite in WAL mode gives a read
transaction a snapshot from its first read on, PostgreSQL's ``REPEATABLE READ`` likewise. Never a
half-applied batch. Each read opens its own connection (the writer keeps its own), so readers in
other threads or processes never block a commit.
"""

from __future__ import annotations

import json
from abc import abstractmethod
from collections.abc import Sequence
from operator import itemgetter
from typing import Any, ClassVar

import msgpack

from ..spec.changes import Row
from .base import BatchSink, Column, NetBatch, SinkError
from .kind import SinkKind
from .reading import NO_TABLE, TableChange, TableSnapshot, same_row

BATCHES_TABLE = "_upsertmat_batches"
"""One row per committed batch: ``(query_id, batch_id, sink_table, changes)``."""
CHANGES_TABLE = "_upsertmat_changes"
"""The committed table changes of sinks opened with ``changelog=True``, in chunks: ``(sink_table,
first_pos, batch_id, count, changes)`` where ``changes`` is a msgpack array of ``[op, row]``
pairs (values exact: integers, floats with NaN and -0.0, booleans, text, null) at positions
``first_pos .. first_pos + count - 1``; positions count 1, 2, ... per table. A chunk holds at
most :data:`CHANGES_PER_CHUNK` changes of one batch: one row per chunk instead of one per change
makes recording a 20,000-key batch about 3x cheaper."""
CHANGES_PER_CHUNK = 1000
MISSES_TABLE = "_upsertmat_misses"
"""One row per explained miss (:mod:`upsertmat.spark.misses`), created by the first batch that has one."""
SQL_TYPES = {
    "bigint": "BIGINT",
    "int": "BIGINT",
    "double": "DOUBLE PRECISION",
    "boolean": "BOOLEAN",
    "string": "TEXT",
}
"""Spark column type -> the SQL column type of the sink table (integers are 64 bits)."""


def quote(name: str) -> str:
    """A quoted SQL identifier (SQLite and PostgreSQL)."""
    return '"' + name.replace('"', '""') + '"'


def sql_type(column: Column) -> str:
    """The SQL type of ``column``; SinkError naming the supported ones."""
    try:
        return SQL_TYPES[column.spark_type]
    except KeyError:
        raise SinkError(
            f"column {column.name!r} has type {column.spark_type}; the sink supports {sorted(SQL_TYPES)}"
        ) from None


def in_key_order(rows: Sequence[Row], pk: Sequence[int]) -> list[Row]:
    """``rows`` sorted by the values at ``pk`` (as given if those do not compare, e.g. a None).

    Only the order of the statements changes, never what the batch writes (it holds one change
    per primary key). A table clustered on its key (SQLite ``WITHOUT ROWID``, a PostgreSQL
    primary-key index) then walks its B-tree once from left to right instead of jumping: with
    50,000 upserts of random keys into 10,000,000 rows SQLite's transaction took 0.9-1.1 s
    sorted against 1.3-1.4 s unsorted (docs/spark.md, *Exactly once*: the cost of the sink write).
    O(n log n)."""
    try:  # itemgetter: the value itself for one column, the tuple of them for several
        return sorted(rows, key=itemgetter(*pk))
    except TypeError:
        return list(rows)


class UpsertSink(BatchSink):
    """A SQL table keyed by ``pk`` (column indexes into ``columns``) plus the batch bookkeeping.

    Subclasses give the driver's parameter mark, blob type and error classes, open the
    connection and run :attr:`create_sql`, and implement :meth:`_begin` (a transaction yielding a
    cursor) and the readers; the write itself (:meth:`_write`) is this class's.
    """

    paramstyle: ClassVar[str] = "?"
    blob_type: ClassVar[str] = "BLOB"
    lock_suffix: ClassVar[str] = ""
    """Appended to the batch-id check (PostgreSQL: ``FOR UPDATE``, so a concurrent second writer
    of the same batch waits and then skips it)."""
    hint = "free space, start the database"
    marks_empty_batches = True

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
            + ", ".join(f"{quote(c.name)} {sql_type(c)}" for c in self.columns)
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
        self.seen_sql = (
            f"SELECT 1 FROM {BATCHES_TABLE} WHERE query_id = {mark} AND batch_id = {mark}{self.lock_suffix}"
        )
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

    def check_columns(self, found: Sequence[str]) -> None:
        """SinkError unless the existing table's columns (``found``, in order) are the job's: a
        table of other columns is another job's, never written into."""
        names = [column.name for column in self.columns]
        if list(found) != names:
            raise SinkError(
                f"{self.where} has columns {list(found)}, the job writes {names}: use another table"
            )

    def _committed(self, transaction: Any, query_id: str, batch_id: int) -> bool:
        transaction.execute(self.seen_sql, (query_id, batch_id))
        return transaction.fetchone() is not None

    def _write(self, transaction: Any, batch: NetBatch) -> None:
        """In the batch's transaction (a cursor): its table changes recorded, its deletes and
        upserts, its misses, its batch id."""
        cursor = transaction
        self.record_changes(cursor, batch.batch_id, batch.upserts, batch.deletes)
        if batch.deletes:
            cursor.executemany(self.delete_sql, in_key_order(batch.deletes, range(len(self.pk))))
        if batch.upserts:
            cursor.executemany(self.upsert_sql, in_key_order(batch.upserts, self.pk))
        if batch.misses:
            cursor.execute(self.create_misses_sql)
            cursor.executemany(
                self.miss_sql,
                [self._miss_record(batch.query_id, batch.batch_id, *miss) for miss in batch.misses],
            )
        cursor.execute(self.mark_sql, (batch.query_id, batch.batch_id, self.table, batch.changes))

    def record_changes(self, cursor: Any, batch_id: int, upserts: list[Row], deletes: list[Row]) -> None:
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
            elif not same_row(before, tuple(row)):
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

    def _miss_record(self, query_id: str, batch_id: int, arrival: int, text: str) -> tuple[Any, ...]:
        """A :data:`MISSES_TABLE` row: the batch, the retraction, its sink key, cause, explanation."""
        data = json.loads(text)
        row, key = json.dumps(data["row"], ensure_ascii=False), json.dumps(data["key"], ensure_ascii=False)
        return (query_id, batch_id, self.table, arrival, data["op"], row, key, data["cause"], text)

    def _select_all(self) -> str:
        order = ", ".join(quote(self.columns[index].name) for index in self.pk)
        names = ", ".join(quote(column.name) for column in self.columns)
        return f"SELECT {names} FROM {quote(self.table)} ORDER BY {order}"


_LAST_POSITION = f"SELECT max(first_pos + count - 1) FROM {CHANGES_TABLE} WHERE sink_table = {{mark}}"


class SqlKind(SinkKind):
    """The readers and the drop of a SQL sink, over a DB-API connection of the kind's driver."""

    records_misses = True
    mark: ClassVar[str] = "?"
    repeatable_read: ClassVar[str] = "BEGIN"
    """The statement that starts a read transaction seeing one committed state."""
    begin_write: ClassVar[str] = "BEGIN"
    """The statement that starts a write transaction (SQLite: ``BEGIN IMMEDIATE``, the write lock
    at once, so two writers never deadlock upgrading a read lock)."""

    @abstractmethod
    def _reader(self, url: str) -> Any | None:
        """A new connection for reading (autocommit: transactions are explicit), or None when
        the database does not exist yet (nothing committed); SinkError if it cannot be opened."""

    @abstractmethod
    def _writer(self, url: str) -> Any | None:
        """A new autocommit connection that may write (None: no database, nothing to drop)."""

    @abstractmethod
    def _tables(self, connection: Any) -> set[str]:
        """The names of the database's tables."""

    @abstractmethod
    def _errors(self) -> tuple[type[BaseException], ...]:
        """The driver's error classes (reported as SinkError)."""

    def snapshot(self, url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
        """ONE read transaction: the batch id, the first ``limit`` rows by primary key (all if
        None), the row count and the changelog position. O(rows returned) plus the count."""
        connection = self._reader(url)
        if connection is None:
            return NO_TABLE
        mark = self.mark
        caught: tuple[type[BaseException], ...] = (*self._errors(), OSError)
        try:
            connection.execute(self.repeatable_read)
            try:
                present = self._tables(connection)
                if table not in present:
                    return NO_TABLE
                batch: int | None = None
                if BATCHES_TABLE in present:
                    found = connection.execute(
                        f"SELECT max(batch_id) FROM {BATCHES_TABLE} WHERE sink_table = {mark}", (table,)
                    ).fetchone()
                    batch = None if found is None or found[0] is None else int(found[0])
                order = f" ORDER BY {', '.join(quote(name) for name in pk)}" if pk else ""
                cursor = connection.execute(
                    f"SELECT * FROM {quote(table)}{order}" + ("" if limit is None else f" LIMIT {int(limit)}")
                )
                columns = tuple(str(item[0]) for item in cursor.description)
                rows = tuple(tuple(row) for row in cursor.fetchall())
                total = int(connection.execute(f"SELECT count(*) FROM {quote(table)}").fetchone()[0])
                pos = 0
                if CHANGES_TABLE in present:
                    last = connection.execute(_LAST_POSITION.format(mark=mark), (table,)).fetchone()
                    pos = 0 if last is None or last[0] is None else int(last[0])
            finally:
                connection.execute("COMMIT")
            return TableSnapshot(batch, columns, rows, total, pos)
        except caught as error:
            raise SinkError(f"cannot read the sink table {table}: {error}") from None
        finally:
            connection.close()

    def changes(
        self, url: str, table: str, after: int, limit: int, upto: int | None = None
    ) -> list[TableChange]:
        """O(limit + one chunk): the chunks are found by their first position (the primary key),
        and a chunk holding position ``after + 1`` starts at most ``CHANGES_PER_CHUNK - 1``
        before it."""
        connection = self._reader(url)
        if connection is None:
            return []
        try:
            if CHANGES_TABLE not in self._tables(connection):
                return []
            bound = "" if upto is None else f" AND first_pos <= {int(upto)}"
            cursor = connection.execute(
                f"SELECT first_pos, batch_id, count, changes FROM {CHANGES_TABLE} "
                f"WHERE sink_table = {self.mark} "
                f"AND first_pos > {int(after) - CHANGES_PER_CHUNK}{bound} ORDER BY first_pos",
                (table,),
            )
            found: list[TableChange] = []
            for first, batch, _count, blob in cursor:
                for offset, (op, row) in enumerate(msgpack.unpackb(bytes(blob), raw=False, use_list=False)):
                    pos = int(first) + offset
                    if pos <= after or (upto is not None and pos > upto):
                        continue
                    found.append(TableChange(pos, int(batch), str(op), tuple(row)))
                    if len(found) >= limit:
                        return found
            return found
        except self._errors() as error:
            raise SinkError(f"cannot read the changes of {table}: {error}") from None
        finally:
            connection.close()

    def last_batch(self, url: str, table: str) -> int | None:
        """One query on :data:`BATCHES_TABLE` (None: nothing committed, or unreadable)."""
        try:
            connection = self._reader(url)
        except SinkError:
            return None
        if connection is None:
            return None
        try:
            if BATCHES_TABLE not in self._tables(connection):
                return None
            found = connection.execute(
                f"SELECT max(batch_id) FROM {BATCHES_TABLE} WHERE sink_table = {self.mark}", (table,)
            ).fetchone()
            return None if found is None or found[0] is None else int(found[0])
        finally:
            connection.close()

    def last_position(self, url: str, table: str) -> int:
        """One query on :data:`CHANGES_TABLE` (0: no change recorded)."""
        connection = self._reader(url)
        if connection is None:
            return 0
        try:
            if CHANGES_TABLE not in self._tables(connection):
                return 0
            found = connection.execute(_LAST_POSITION.format(mark=self.mark), (table,)).fetchone()
            return 0 if found is None or found[0] is None else int(found[0])
        except self._errors() as error:
            raise SinkError(f"cannot read the changes of {table}: {error}") from None
        finally:
            connection.close()

    def drop(self, url: str, table: str) -> None:
        """One transaction: ``DROP TABLE`` and the table's rows of the bookkeeping tables (batch
        ids, changes, misses); the other tables of the database stay."""
        connection = self._writer(url)
        if connection is None:
            return
        try:
            connection.execute(self.begin_write)
            present = self._tables(connection)
            connection.execute(f"DROP TABLE IF EXISTS {quote(table)}")
            for bookkeeping in (BATCHES_TABLE, CHANGES_TABLE, MISSES_TABLE):
                if bookkeeping in present:
                    connection.execute(f"DELETE FROM {bookkeeping} WHERE sink_table = {self.mark}", (table,))
            connection.execute("COMMIT")
        except self._errors() as error:
            raise SinkError(f"cannot drop the sink table {table}: {error}") from None
        finally:
            connection.close()
