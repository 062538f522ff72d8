"""The SQLite sink (embedded, the default): a file; each batch one ``BEGIN IMMEDIATE`` transaction.

URLs: ``sqlite:///rel/path.db`` (three slashes) is relative to a base directory,
``sqlite:////abs/path.db`` (four) absolute, and a URL without a scheme is a plain file path,
relative or absolute as written (SQLAlchemy's convention, :mod:`.urls`). A string that starts
like a URL scheme (letters, then ``:``: ``mysql://…``, ``delta:…``) is never taken for a file
path; write ``./name:x.db`` for such a file.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ..spec.changes import Row
from .base import Column, SinkError
from .kind import SinkUrlError
from .sql import BATCHES_TABLE, SqlKind, UpsertSink, quote
from .sqlite_checkpoint import WalCheckpointer

PREFIX = "sqlite:///"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


class SqliteSink(UpsertSink):
    """SQLite file; each batch is one ``BEGIN IMMEDIATE`` transaction.

    Durability: WAL journal with ``synchronous=FULL``, so a committed batch (its rows and its
    batch id) survives a crash of the process and of the machine; a WAL commit is one append
    and one fsync of the log, not a rewrite of the table's pages; copying the pages into the
    database file (the checkpoint) runs after the commit on a thread of its own
    (:mod:`.sqlite_checkpoint`), while Spark computes the next batch. The table is created
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
        self._db.execute("PRAGMA wal_autocheckpoint=0")  # self._checkpointer copies the log instead
        self._checkpointer = WalCheckpointer(path)
        for statement in self.create_sql:
            self._db.execute(statement)
        try:
            self.check_columns([row[1] for row in self._db.execute(f"PRAGMA table_info({quote(table)})")])
        except SinkError:
            self._db.close()
            raise

    @contextlib.contextmanager
    def _begin(self) -> Iterator[Any]:
        cursor = self._db.cursor()
        cursor.execute("BEGIN IMMEDIATE")
        try:
            yield cursor
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already (a full disk)
                cursor.execute("ROLLBACK")
            raise
        cursor.execute("COMMIT")
        self._checkpointer.request()

    def rows(self) -> list[Row]:
        return [tuple(row) for row in self._db.execute(self._select_all())]

    def committed_batches(self) -> int:
        return int(self._db.execute(f"SELECT count(*) FROM {BATCHES_TABLE}").fetchone()[0])

    def close(self) -> None:
        self._checkpointer.close()
        self._db.close()


def claims(url: str) -> bool:
    """True for ``sqlite:`` URLs and plain file paths (no URL scheme in front). O(1)."""
    return url.startswith("sqlite:") or _SCHEME.match(url) is None


def sqlite_path(url: str, base: Path | None = None) -> Path:
    """The SQLite file ``url`` names; a relative one is joined to ``base`` (default: left
    relative, i.e. to the working directory). SinkUrlError if ``url`` is another kind's or
    names no file."""
    if not claims(url):
        raise SinkUrlError(f"not a SQLite sink: {url}")
    if url.startswith("sqlite:"):
        if not url.startswith(PREFIX) or len(url) == len(PREFIX):
            raise SinkUrlError(
                f"unsupported SQLite URL {url!r}: write sqlite:///relative/path.db or "
                "sqlite:////absolute/path.db (SQLAlchemy's convention), or a plain file path"
            )
        path = Path(url[len(PREFIX) :])
    elif not url.strip():
        raise SinkUrlError("the sink URL is empty")
    else:
        path = Path(url).expanduser()
    return path if path.is_absolute() or base is None else base / path


class SqliteKind(SqlKind):
    """``sqlite:///…`` URLs and plain file paths."""

    name = "sqlite"
    forms = ("a SQLite path", "sqlite:///…")
    begin_write = "BEGIN IMMEDIATE"

    def claims(self, url: str) -> bool:
        return claims(url)

    def resolve(self, url: str, base: Path) -> str:
        return str(sqlite_path(url, base))

    def local_path(self, url: str, base: Path | None = None) -> Path | None:
        return sqlite_path(url, base)

    def url_in(self, directory: Path, name: str) -> str:
        return str(directory / f"{name}.db")

    def open(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> SqliteSink:
        try:
            path = sqlite_path(url)
        except SinkUrlError as error:
            raise SinkError(str(error)) from None
        return SqliteSink(path, table, columns, pk, changelog=changelog)

    def _reader(self, url: str) -> Any | None:
        try:
            path = sqlite_path(url)
        except SinkUrlError as error:
            raise SinkError(str(error)) from None
        if not path.exists():
            return None
        try:
            return sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        except sqlite3.Error as error:
            raise SinkError(f"cannot read the sink {path}: {error}") from None

    def _writer(self, url: str) -> Any | None:
        path = sqlite_path(url)
        if not path.exists():
            return None
        return sqlite3.connect(str(path), isolation_level=None)

    def _tables(self, connection: Any) -> set[str]:
        found = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {str(row[0]) for row in found}

    def _errors(self) -> tuple[type[BaseException], ...]:
        return (sqlite3.Error,)
