"""The gateway's registry on disk: sessions, jobs, table snapshots and changelog cursors.

One SQLite database, ``<data root>/gateway.db`` (WAL, ``synchronous=FULL``), written in short
transactions, so a gateway killed at any instant (SIGKILL) restarts with every session, every
job and its wanted state (``RUNNING`` jobs are started again on their checkpoints), every
snapshot and every cursor as they were committed: tokens handed out stay valid.

Tables:

- ``sessions(id, created, last_used, properties)``: a session's configuration layer (JSON).
- ``jobs(id, session_id, name, kind, document, settings, wanted, state, error, created, ...)``:
  the submitted job file (YAML text) or plan (JSON text), the per-request layer, what the user
  wants (``RUNNING``/``STOPPED``) and what the job is (``state``, the last ``error``).
- ``snapshots(id, job_id, batch_id, created, expires, columns, total, held, page_size, bytes)``
  and ``snapshot_pages(snapshot_id, page, rows)``: a table result set pinned to one batch, one
  msgpack blob per page. Bounded in count and bytes: adding one past a bound drops the oldest
  first (:meth:`Registry.add_snapshot`).
- ``cursors(id, job_id, current, created, last_used)`` and ``cursor_pages(cursor_id, token,
  start, stop, body)``: a changelog reader's current token, where its page starts, and the body
  served for the previous token, stored: asking for it again returns those bytes (the retry
  rule), whatever happened since. Bounded in count: the least recently used go first.

Job states change only through :meth:`Registry.transition` (:mod:`.lifecycle`'s table).

Every write is one transaction on the writer connection (one lock); each read borrows a
connection from a pool of read connections (WAL lets it read the last commit while a write
runs) and gives it back, so the gateway holds at most as many read connections as reads ever ran
at once, however many threads the ASGI server starts and retires. O(rows touched).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import msgpack

from .lifecycle import WANTED, Event, JobState, next_state

STARTING = JobState.STARTING.value

SCHEMA_VERSION = 2
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created REAL NOT NULL, "
    "last_used REAL NOT NULL, properties TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, name TEXT NOT NULL, "
    "kind TEXT NOT NULL, document TEXT NOT NULL, settings TEXT NOT NULL, wanted TEXT NOT NULL, "
    "state TEXT NOT NULL, error TEXT, created REAL NOT NULL, seq INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS snapshots (id TEXT PRIMARY KEY, job_id TEXT NOT NULL, batch_id INTEGER, "
    "created REAL NOT NULL, expires REAL NOT NULL, columns TEXT NOT NULL, total INTEGER NOT NULL, "
    "held INTEGER NOT NULL, page_size INTEGER NOT NULL, bytes INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS snapshot_pages (snapshot_id TEXT NOT NULL, page INTEGER NOT NULL, "
    "rows BLOB NOT NULL, PRIMARY KEY (snapshot_id, page)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS cursors (id TEXT PRIMARY KEY, job_id TEXT NOT NULL, "
    "current INTEGER NOT NULL, created REAL NOT NULL, last_used REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS cursor_pages (cursor_id TEXT NOT NULL, token INTEGER NOT NULL, "
    "start INTEGER NOT NULL, stop INTEGER, body BLOB, PRIMARY KEY (cursor_id, token)) WITHOUT ROWID",
)
MIGRATIONS = (
    # version 1 -> 2: snapshots in page blobs (the rows one per row are dropped: snapshots live
    # minutes), stored page bodies for the retry rule.
    "DROP TABLE IF EXISTS snapshot_rows",
    "DELETE FROM snapshots",
    "ALTER TABLE snapshots ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0",
    "ALTER TABLE cursor_pages ADD COLUMN body BLOB",
)


def new_id(prefix: str) -> str:
    """A random identifier such as ``j-3f9a1c07b2``: unguessable enough for a loopback service,
    short enough to type."""
    return f"{prefix}-{secrets.token_hex(5)}"


@dataclass(frozen=True)
class SessionRecord:
    """A session: its id, times (epoch seconds) and configuration layer."""

    id: str
    created: float
    last_used: float
    properties: dict[str, Any]


@dataclass(frozen=True)
class JobRecord:
    """A job as the registry holds it."""

    id: str
    session_id: str
    name: str
    kind: str
    document: str
    settings: dict[str, Any]
    wanted: str
    state: str
    error: str | None
    created: float


@dataclass(frozen=True)
class SnapshotRecord:
    """A pinned table result set: batch id, columns, rows held (``held``), rows in the table."""

    id: str
    job_id: str
    batch_id: int | None
    created: float
    expires: float
    columns: tuple[str, ...]
    total: int
    held: int
    page_size: int


class Registry:
    """The registry database of a data root (created if missing)."""

    def __init__(self, root: Path) -> None:
        self.path = root / "gateway.db"
        self.lock = threading.Lock()
        # The read connections' own lock: a read must never wait for a write transaction.
        self.readers_lock = threading.Lock()
        self.idle_readers: list[sqlite3.Connection] = []
        self.closed = False
        self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA journal_size_limit=16777216")  # the WAL shrinks back after a burst
        version = int(self.db.execute("PRAGMA user_version").fetchone()[0])
        existing = self.db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'jobs'").fetchone()[0]
        if existing and version < SCHEMA_VERSION:
            for statement in MIGRATIONS:
                with contextlib.suppress(sqlite3.OperationalError):  # a column already there
                    self.db.execute(statement)
        for statement in SCHEMA:
            self.db.execute(statement)
        self.db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        """Close the writer and the idle read connections; one still in use is closed when its
        read gives it back."""
        with self.lock:
            self.db.close()
        with self.readers_lock:
            self.closed = True
            for reader in self.idle_readers:
                reader.close()
            self.idle_readers.clear()

    def _borrow_reader(self) -> sqlite3.Connection:
        """An idle read connection, or a new one if every one is in use: in WAL mode a reader sees
        the last commit and never waits for a writer (a page by token is not held up by a
        snapshot being written). A connection per thread would leak one (its page cache, up to
        2 MB) each time the ASGI server retires an idle worker thread and starts another."""
        with self.readers_lock:
            if self.closed:
                raise sqlite3.ProgrammingError("the registry is closed")
            if self.idle_readers:
                return self.idle_readers.pop()
        return sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)

    def _give_back(self, reader: sqlite3.Connection) -> None:
        with self.readers_lock:
            if not self.closed:
                self.idle_readers.append(reader)
                return
        reader.close()

    def _write(self, statements: Sequence[tuple[str, Sequence[Any]]]) -> None:
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for sql, parameters in statements:
                    self.db.execute(sql, parameters)
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _read(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        reader = self._borrow_reader()
        try:
            return list(reader.execute(sql, parameters).fetchall())
        finally:
            self._give_back(reader)

    # sessions

    def add_session(self, properties: dict[str, Any]) -> SessionRecord:
        now = time.time()
        record = SessionRecord(new_id("s"), now, now, dict(properties))
        self._write(
            [("INSERT INTO sessions VALUES (?, ?, ?, ?)", (record.id, now, now, json.dumps(properties)))]
        )
        return record

    def session(self, session_id: str) -> SessionRecord | None:
        rows = self._read(
            "SELECT id, created, last_used, properties FROM sessions WHERE id = ?", (session_id,)
        )
        if not rows:
            return None
        id_, created, last_used, properties = rows[0]
        return SessionRecord(id_, created, last_used, json.loads(properties))

    def sessions(self) -> list[SessionRecord]:
        rows = self._read("SELECT id, created, last_used, properties FROM sessions ORDER BY created")
        return [SessionRecord(a, b, c, json.loads(d)) for a, b, c, d in rows]

    def touch_session(self, session_id: str, properties: dict[str, Any] | None = None) -> None:
        if properties is None:
            self._write([("UPDATE sessions SET last_used = ? WHERE id = ?", (time.time(), session_id))])
        else:
            self._write(
                [
                    (
                        "UPDATE sessions SET last_used = ?, properties = ? WHERE id = ?",
                        (time.time(), json.dumps(properties), session_id),
                    )
                ]
            )

    def remove_session(self, session_id: str) -> None:
        self._write([("DELETE FROM sessions WHERE id = ?", (session_id,))])

    # jobs

    def add_job(
        self, session_id: str, name: str, kind: str, document: str, settings: dict[str, Any], job_id: str
    ) -> JobRecord:
        """A new job, ``STARTING`` and wanted ``RUNNING``."""
        now = time.time()
        seq_rows = self._read("SELECT coalesce(max(seq), 0) FROM jobs")
        seq = int(seq_rows[0][0]) + 1
        self._write(
            [
                (
                    "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, 'RUNNING', ?, NULL, ?, ?)",
                    (job_id, session_id, name, kind, document, json.dumps(settings), STARTING, now, seq),
                )
            ]
        )
        record = self.job(job_id)
        assert record is not None
        return record

    def _job(self, row: tuple[Any, ...]) -> JobRecord:
        id_, session_id, name, kind, document, settings, wanted, state, error, created = row
        return JobRecord(
            id_, session_id, name, kind, document, json.loads(settings), wanted, state, error, created
        )

    _JOB_COLUMNS = "id, session_id, name, kind, document, settings, wanted, state, error, created"

    def job(self, job_id: str) -> JobRecord | None:
        rows = self._read(f"SELECT {self._JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return self._job(rows[0]) if rows else None

    def jobs(self) -> list[JobRecord]:
        return [self._job(row) for row in self._read(f"SELECT {self._JOB_COLUMNS} FROM jobs ORDER BY seq")]

    def transition(
        self, job_id: str, event: Event, *, error: str | None = None, clear_error: bool = False
    ) -> JobRecord:
        """Apply ``event`` to the job through :data:`~.lifecycle.TRANSITIONS`, in one transaction
        with the read of its current state; the record after it. BadTransition if the table does
        not allow it (nothing changes), KeyError if there is no such job. ``DELETE`` removes the
        job, its snapshots and its changelog readers (the record returned is the last one)."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                rows = self.db.execute(
                    f"SELECT {self._JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,)
                ).fetchall()
                if not rows:
                    raise KeyError(job_id)
                record = self._job(rows[0])
                state = next_state(job_id, JobState(record.state), event)
                wanted = WANTED.get(event, record.wanted)
                new_error = None if clear_error else (error if error is not None else record.error)
                if state is JobState.DELETED:
                    self._forget_job(job_id)
                else:
                    self.db.execute(
                        "UPDATE jobs SET state = ?, wanted = ?, error = ? WHERE id = ?",
                        (state.value, wanted, new_error, job_id),
                    )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return replace(record, state=state.value, wanted=wanted, error=new_error)

    def _forget_job(self, job_id: str) -> None:
        """(In a write transaction.) The job's rows and everything that points at it."""
        self.db.execute(
            "DELETE FROM snapshot_pages WHERE snapshot_id IN (SELECT id FROM snapshots WHERE job_id = ?)",
            (job_id,),
        )
        self.db.execute("DELETE FROM snapshots WHERE job_id = ?", (job_id,))
        self.db.execute(
            "DELETE FROM cursor_pages WHERE cursor_id IN (SELECT id FROM cursors WHERE job_id = ?)", (job_id,)
        )
        self.db.execute("DELETE FROM cursors WHERE job_id = ?", (job_id,))
        self.db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    # snapshots

    def add_snapshot(
        self,
        job_id: str,
        batch_id: int | None,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        total: int,
        page_size: int,
        ttl_seconds: float,
        max_snapshots: int,
        max_bytes: int,
    ) -> SnapshotRecord:
        """Store a snapshot, one msgpack blob per page; first drop the oldest snapshots until
        this one fits within ``max_snapshots`` and ``max_bytes`` (all snapshots' pages together).
        A snapshot larger than ``max_bytes`` alone keeps the first pages that fit (``held`` says
        how many rows). O(rows)."""
        pages: list[bytes] = []
        size = 0
        held = 0
        for first in range(0, len(rows), page_size):
            chunk = rows[first : first + page_size]
            blob = msgpack.packb([list(row) for row in chunk], use_bin_type=True)
            if pages and size + len(blob) > max_bytes:
                break
            pages.append(blob)
            size += len(blob)
            held += len(chunk)
        now = time.time()
        record = SnapshotRecord(
            new_id("t"), job_id, batch_id, now, now + ttl_seconds, tuple(columns), total, held, page_size
        )
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                count, used = self.db.execute(
                    "SELECT count(*), coalesce(sum(bytes), 0) FROM snapshots"
                ).fetchone()
                oldest = self.db.execute("SELECT id, bytes FROM snapshots ORDER BY created").fetchall()
                for snapshot_id, snapshot_bytes in oldest:
                    if count + 1 <= max_snapshots and used + size <= max_bytes:
                        break
                    self.db.execute("DELETE FROM snapshot_pages WHERE snapshot_id = ?", (snapshot_id,))
                    self.db.execute("DELETE FROM snapshots WHERE id = ?", (snapshot_id,))
                    count -= 1
                    used -= int(snapshot_bytes)
                self.db.execute(
                    "INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        record.id,
                        job_id,
                        batch_id,
                        now,
                        record.expires,
                        json.dumps(list(columns)),
                        total,
                        held,
                        page_size,
                        size,
                    ),
                )
                self.db.executemany(
                    "INSERT INTO snapshot_pages VALUES (?, ?, ?)",
                    ((record.id, number, blob) for number, blob in enumerate(pages)),
                )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return record

    def snapshot(self, snapshot_id: str) -> SnapshotRecord | None:
        rows = self._read(
            "SELECT id, job_id, batch_id, created, expires, columns, total, held, page_size FROM snapshots "
            "WHERE id = ?",
            (snapshot_id,),
        )
        if not rows:
            return None
        id_, job_id, batch_id, created, expires, columns, total, held, page_size = rows[0]
        return SnapshotRecord(
            id_, job_id, batch_id, created, expires, tuple(json.loads(columns)), total, held, page_size
        )

    def snapshot_page(self, snapshot_id: str, page: int) -> list[list[Any]] | None:
        """The rows of one page (None: the snapshot or the page is gone). O(page)."""
        rows = self._read(
            "SELECT rows FROM snapshot_pages WHERE snapshot_id = ? AND page = ?", (snapshot_id, page)
        )
        if not rows:
            return None
        found: list[list[Any]] = msgpack.unpackb(rows[0][0], raw=False)
        return found

    def snapshot_usage(self) -> tuple[int, int]:
        """(snapshots, bytes of their pages)."""
        count, used = self._read("SELECT count(*), coalesce(sum(bytes), 0) FROM snapshots")[0]
        return int(count), int(used)

    def expire_snapshots(self, now: float | None = None) -> int:
        """Delete the snapshots past their expiry (and their pages); how many."""
        now = time.time() if now is None else now
        expired = [row[0] for row in self._read("SELECT id FROM snapshots WHERE expires <= ?", (now,))]
        for snapshot_id in expired:
            self._write(
                [
                    ("DELETE FROM snapshot_pages WHERE snapshot_id = ?", (snapshot_id,)),
                    ("DELETE FROM snapshots WHERE id = ?", (snapshot_id,)),
                ]
            )
        return len(expired)

    # changelog cursors

    def add_cursor(self, job_id: str, start: int, max_cursors: int) -> str:
        """A new reader of ``job_id``'s changelog whose token 0 starts after position ``start``;
        the least recently used readers go first when there would be more than ``max_cursors``."""
        cursor_id = new_id("c")
        now = time.time()
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                count = int(self.db.execute("SELECT count(*) FROM cursors").fetchone()[0])
                if count >= max_cursors:
                    for (old,) in self.db.execute(
                        "SELECT id FROM cursors ORDER BY last_used LIMIT ?", (count - max_cursors + 1,)
                    ).fetchall():
                        self.db.execute("DELETE FROM cursor_pages WHERE cursor_id = ?", (old,))
                        self.db.execute("DELETE FROM cursors WHERE id = ?", (old,))
                self.db.execute("INSERT INTO cursors VALUES (?, ?, 0, ?, ?)", (cursor_id, job_id, now, now))
                self.db.execute("INSERT INTO cursor_pages VALUES (?, 0, ?, NULL, NULL)", (cursor_id, start))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return cursor_id

    def cursor_count(self) -> int:
        return int(self._read("SELECT count(*) FROM cursors")[0][0])

    def expire_cursors(self, before: float) -> int:
        """Delete the changelog cursors last used before ``before`` (epoch seconds); how many."""
        stale = [row[0] for row in self._read("SELECT id FROM cursors WHERE last_used < ?", (before,))]
        for cursor_id in stale:
            self._write(
                [
                    ("DELETE FROM cursor_pages WHERE cursor_id = ?", (cursor_id,)),
                    ("DELETE FROM cursors WHERE id = ?", (cursor_id,)),
                ]
            )
        return len(stale)

    def cursor(self, cursor_id: str) -> tuple[str, int] | None:
        """(job id, current token) of a cursor, or None."""
        rows = self._read("SELECT job_id, current FROM cursors WHERE id = ?", (cursor_id,))
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def cursor_page(self, cursor_id: str, token: int) -> tuple[int, bytes | None] | None:
        """(start, body) of a token's page: body is the answer served for it (None: not served
        yet); None if the token is not one of the cursor's last two."""
        rows = self._read(
            "SELECT start, body FROM cursor_pages WHERE cursor_id = ? AND token = ?", (cursor_id, token)
        )
        if not rows:
            return None
        return int(rows[0][0]), None if rows[0][1] is None else bytes(rows[0][1])

    def serve_page(self, cursor_id: str, token: int, stop: int, body: bytes) -> bytes:
        """Record ``body`` as the answer for ``token`` (the current one), whose page ends at
        ``stop``: ``token + 1`` becomes current, starting there; pages before ``token`` are
        forgotten. If another request served ``token`` first, nothing changes and its stored
        body is returned: concurrent requests for one token all get the same bytes. O(1)."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                row = self.db.execute(
                    "SELECT body FROM cursor_pages WHERE cursor_id = ? AND token = ?", (cursor_id, token)
                ).fetchone()
                if row is not None and row[0] is not None:
                    self.db.execute("COMMIT")
                    return bytes(row[0])
                self.db.execute(
                    "UPDATE cursor_pages SET stop = ?, body = ? WHERE cursor_id = ? AND token = ?",
                    (stop, body, cursor_id, token),
                )
                self.db.execute(
                    "INSERT OR IGNORE INTO cursor_pages VALUES (?, ?, ?, NULL, NULL)",
                    (cursor_id, token + 1, stop),
                )
                self.db.execute(
                    "DELETE FROM cursor_pages WHERE cursor_id = ? AND token < ?", (cursor_id, token)
                )
                self.db.execute(
                    "UPDATE cursors SET current = ?, last_used = ? WHERE id = ?",
                    (token + 1, time.time(), cursor_id),
                )
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
        return body

    def touch_cursor(self, cursor_id: str) -> None:
        self._write([("UPDATE cursors SET last_used = ? WHERE id = ?", (time.time(), cursor_id))])
