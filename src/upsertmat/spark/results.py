"""Reading a sink's committed results: a table snapshot pinned to one batch, and its changelog.

The sink (:mod:`.sink`) commits each micro-batch in one transaction together with its batch id
(``_upsertmat_batches``) and, when opened with ``changelog=True``, the table changes the batch
made (``_upsertmat_changes``). So one *read* transaction sees the table exactly as some committed
batch left it, and that batch is the greatest id recorded for the table: SQLite in WAL mode gives
a read transaction a snapshot from its first read on, PostgreSQL's ``REPEATABLE READ`` likewise.
Never a half-applied batch. Each call opens its own connection (the writer keeps its own), so
readers in other threads or processes never block a commit. No pyspark import.

Lakehouse sinks (``delta:``, ``iceberg:`` URLs) are read the same way through :func:`lakehouse_snapshot`
and :func:`lakehouse_changes`: a snapshot is the table at ONE pinned Delta version / Iceberg
snapshot (the batch id is the one that version's newest batch commit carries); the changelog is
Delta's change data feed of each batch commit, or for Iceberg the difference between the data
files a batch's snapshots added and removed; positions are ``batch_id << 32 | index + 1``
(increasing and stable, not dense).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from ..spec.changes import Row
from .sink import BATCHES_TABLE, CHANGES_PER_CHUNK, CHANGES_TABLE, SinkError, quote
from .sinkurl import SinkUrlError, delta_location, is_delta, is_lakehouse, is_postgresql, sqlite_path

_LAST_POSITION = f"SELECT max(first_pos + count - 1) FROM {CHANGES_TABLE} WHERE sink_table = {{mark}}"


@dataclass(frozen=True)
class TableSnapshot:
    """The table after batch ``batch_id`` (None: no batch committed yet): ``columns``, ``rows``
    ordered by primary key (at most the limit asked for), ``total`` rows in the table, and
    ``changes_pos``: the changelog position at that batch (0 without a changelog)."""

    batch_id: int | None
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    total: int
    changes_pos: int


@dataclass(frozen=True)
class Change:
    """One committed table change: its position (1, 2, ...), batch id, ``op`` and row."""

    pos: int
    batch_id: int
    op: str
    row: Row


def _connect(url: str) -> tuple[Any, str]:
    """(connection, parameter mark) for reading; (None, mark) for a SQLite file not created yet
    (nothing committed); SinkError if the database cannot be opened."""
    if is_postgresql(url):
        import psycopg

        try:
            connection = psycopg.connect(url, autocommit=True)
        except psycopg.Error as error:
            raise SinkError(f"cannot read the sink: {type(error).__name__}: {error}") from None
        return connection, "%s"
    try:
        path = sqlite_path(url)
    except SinkUrlError as error:
        raise SinkError(str(error)) from None
    if not path.exists():
        return None, "?"
    try:
        lite = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as error:
        raise SinkError(f"cannot read the sink {path}: {error}") from None
    return lite, "?"


def _tables(connection: Any, postgres: bool) -> set[str]:
    if postgres:
        found = connection.execute("SELECT table_name FROM information_schema.tables").fetchall()
    else:
        found = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {str(row[0]) for row in found}


def lakehouse_snapshot(url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
    """:func:`read_snapshot` of a Delta or Iceberg sink: the table at its current version /
    snapshot, pinned (one version read whole). O(rows)."""
    try:
        if is_delta(url):
            from .delta import read_snapshot as read_delta

            found: Any = read_delta(delta_location(url), pk, limit)
        else:
            from .iceberg import read_snapshot as read_iceberg

            found = read_iceberg(url, table, pk, limit)
    except SinkError:
        raise
    except Exception as error:  # the table libraries raise their own classes
        raise SinkError(
            f"cannot read the sink table {table} of {url}: {type(error).__name__}: {error}"
        ) from None
    if found is None:
        return TableSnapshot(None, (), (), 0, 0)
    return TableSnapshot(found.batch_id, found.columns, found.rows, found.total, found.changes_pos)


def lakehouse_changes(url: str, table: str, after: int, limit: int, upto: int | None = None) -> list[Change]:
    """:func:`read_changes` of a Delta or Iceberg sink (its primary key from the table's metadata)."""
    try:
        if is_delta(url):
            from .delta import read_changes as delta_changes

            found = delta_changes(delta_location(url), [], after, limit, upto)
        else:
            from .iceberg import read_changes as iceberg_changes

            found = iceberg_changes(url, table, [], after, limit, upto)
    except SinkError:
        raise
    except Exception as error:
        raise SinkError(
            f"cannot read the changes of {table} of {url}: {type(error).__name__}: {error}"
        ) from None
    return [Change(pos, batch, op, row) for pos, batch, op, row in found]


def read_snapshot(url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
    """The table as the last committed batch left it, in ONE read transaction: that batch's id,
    the first ``limit`` rows by primary key (all if None), the row count and the changelog
    position. O(rows returned) plus the count."""
    if is_lakehouse(url):
        return lakehouse_snapshot(url, table, pk, limit)
    connection, mark = _connect(url)
    if connection is None:
        return TableSnapshot(None, (), (), 0, 0)
    postgres = is_postgresql(url)
    try:
        connection.execute("BEGIN" if not postgres else "BEGIN ISOLATION LEVEL REPEATABLE READ")
        try:
            present = _tables(connection, postgres)
            if table not in present:
                return TableSnapshot(None, (), (), 0, 0)
            found = connection.execute(
                f"SELECT max(batch_id) FROM {BATCHES_TABLE} WHERE sink_table = {mark}", (table,)
            ).fetchone()
            batch = None if found is None or found[0] is None else int(found[0])
            cursor = connection.execute(
                f"SELECT * FROM {quote(table)} ORDER BY {', '.join(quote(name) for name in pk)}"
                + ("" if limit is None else f" LIMIT {int(limit)}")
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
    except (sqlite3.Error, OSError) as error:
        raise SinkError(f"cannot read the sink table {table}: {error}") from None
    finally:
        connection.close()


def snapshot_header(url: str, table: str, pk: Sequence[str]) -> TableSnapshot | None:
    """:func:`read_snapshot` without rows (the batch id, the row count, the changelog
    position), or None when the sink cannot be read (SinkError): what a status or a metric
    shows. O(1) plus the count."""
    try:
        return read_snapshot(url, table, pk, 0)
    except SinkError:
        return None


def read_changes(url: str, table: str, after: int, limit: int, upto: int | None = None) -> list[Change]:
    """The committed changes of ``table`` at positions ``after < pos [<= upto]``, in order, at most
    ``limit``. O(limit + one chunk): the chunks are found by their first position (the primary
    key), and a chunk holding position ``after + 1`` starts at most ``CHANGES_PER_CHUNK - 1``
    before it."""
    if is_lakehouse(url):
        return lakehouse_changes(url, table, after, limit, upto)
    connection, mark = _connect(url)
    if connection is None:
        return []
    postgres = is_postgresql(url)
    try:
        if CHANGES_TABLE not in _tables(connection, postgres):
            return []
        bound = "" if upto is None else f" AND first_pos <= {int(upto)}"
        cursor = connection.execute(
            f"SELECT first_pos, batch_id, count, changes FROM {CHANGES_TABLE} WHERE sink_table = {mark} "
            f"AND first_pos > {int(after) - CHANGES_PER_CHUNK}{bound} ORDER BY first_pos",
            (table,),
        )
        found: list[Change] = []
        for first, batch, _count, blob in cursor:
            for offset, (op, row) in enumerate(msgpack.unpackb(bytes(blob), raw=False, use_list=False)):
                pos = int(first) + offset
                if pos <= after or (upto is not None and pos > upto):
                    continue
                found.append(Change(pos, int(batch), str(op), tuple(row)))
                if len(found) >= limit:
                    return found
        return found
    except sqlite3.Error as error:
        raise SinkError(f"cannot read the changes of {table}: {error}") from None
    finally:
        connection.close()


def last_batch(url: str, table: str) -> int | None:
    """The greatest batch id committed for ``table`` (None: none yet, or no database)."""
    if is_lakehouse(url):
        try:
            return lakehouse_snapshot(url, table, (), 0).batch_id
        except SinkError:
            return None
    try:
        connection, mark = _connect(url)
    except SinkError:
        return None
    if connection is None:
        return None
    try:
        if BATCHES_TABLE not in _tables(connection, is_postgresql(url)):
            return None
        found = connection.execute(
            f"SELECT max(batch_id) FROM {BATCHES_TABLE} WHERE sink_table = {mark}", (table,)
        ).fetchone()
        return None if found is None or found[0] is None else int(found[0])
    finally:
        connection.close()


def last_position(url: str, table: str) -> int:
    """The changelog position of the last committed change of ``table`` (0: none)."""
    if is_lakehouse(url):
        return lakehouse_snapshot(url, table, (), 0).changes_pos
    connection, mark = _connect(url)
    if connection is None:
        return 0
    try:
        if CHANGES_TABLE not in _tables(connection, is_postgresql(url)):
            return 0
        found = connection.execute(_LAST_POSITION.format(mark=mark), (table,)).fetchone()
        return 0 if found is None or found[0] is None else int(found[0])
    except sqlite3.Error as error:
        raise SinkError(f"cannot read the changes of {table}: {error}") from None
    finally:
        connection.close()
