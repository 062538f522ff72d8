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
- ``snapshots(id, job_id, batch_id, created, expires, columns, total, page_size)`` and
  ``snapshot_rows(snapshot_id, ordinal, row)``: a table result set pinned to one batch.
- ``cursors(id, job_id, current, created, last_used)`` and ``cursor_pages(cursor_id, token,
  start, stop)``: a changelog reader's current token and the page boundaries of its last two
  tokens (the retry rule).

Every method is one transaction on a connection of its own thread (``check_same_thread`` off,
one lock): O(rows touched).
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, created REAL NOT NULL, "
    "last_used REAL NOT NULL, properties TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, name TEXT NOT NULL, "
    "kind TEXT NOT NULL, document TEXT NOT NULL, settings TEXT NOT NULL, wanted TEXT NOT NULL, "
    "state TEXT NOT NULL, error TEXT, created REAL NOT NULL, seq INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS snapshots (id TEXT PRIMARY KEY, job_id TEXT NOT NULL, batch_id INTEGER, "
    "created REAL NOT NULL, expires REAL NOT NULL, columns TEXT NOT NULL, total INTEGER NOT NULL, "
    "held INTEGER NOT NULL, page_size INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS snapshot_rows (snapshot_id TEXT NOT NULL, ordinal INTEGER NOT NULL, "
    "row TEXT NOT NULL, PRIMARY KEY (snapshot_id, ordinal)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS cursors (id TEXT PRIMARY KEY, job_id TEXT NOT NULL, "
    "current INTEGER NOT NULL, created REAL NOT NULL, last_used REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS cursor_pages (cursor_id TEXT NOT NULL, token INTEGER NOT NULL, "
    "start INTEGER NOT NULL, stop INTEGER, PRIMARY KEY (cursor_id, token)) WITHOUT ROWID",
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
        self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=FULL")
        for statement in SCHEMA:
            self.db.execute(statement)

    def close(self) -> None:
        with self.lock:
            self.db.close()

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
        with self.lock:
            return list(self.db.execute(sql, parameters).fetchall())

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
        now = time.time()
        seq_rows = self._read("SELECT coalesce(max(seq), 0) FROM jobs")
        seq = int(seq_rows[0][0]) + 1
        self._write(
            [
                (
                    "INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, 'RUNNING', 'STARTING', NULL, ?, ?)",
                    (job_id, session_id, name, kind, document, json.dumps(settings), now, seq),
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

    def set_job(
        self,
        job_id: str,
        *,
        state: str | None = None,
        wanted: str | None = None,
        error: str | None = None,
        clear_error: bool = False,
    ) -> None:
        sets: list[str] = []
        values: list[Any] = []
        if state is not None:
            sets.append("state = ?")
            values.append(state)
        if wanted is not None:
            sets.append("wanted = ?")
            values.append(wanted)
        if error is not None or clear_error:
            sets.append("error = ?")
            values.append(error)
        if sets:
            self._write([(f"UPDATE jobs SET {', '.join(sets)} WHERE id = ?", (*values, job_id))])

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
    ) -> SnapshotRecord:
        now = time.time()
        record = SnapshotRecord(
            new_id("t"), job_id, batch_id, now, now + ttl_seconds, tuple(columns), total, len(rows), page_size
        )
        statements: list[tuple[str, Sequence[Any]]] = [
            (
                "INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.id,
                    job_id,
                    batch_id,
                    now,
                    record.expires,
                    json.dumps(list(columns)),
                    total,
                    len(rows),
                    page_size,
                ),
            )
        ]
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for sql, parameters in statements:
                    self.db.execute(sql, parameters)
                self.db.executemany(
                    "INSERT INTO snapshot_rows VALUES (?, ?, ?)",
                    ((record.id, ordinal, json.dumps(list(row))) for ordinal, row in enumerate(rows)),
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

    def snapshot_rows(self, snapshot_id: str, first: int, count: int) -> list[list[Any]]:
        rows = self._read(
            "SELECT row FROM snapshot_rows WHERE snapshot_id = ? AND ordinal >= ? AND ordinal < ? "
            "ORDER BY ordinal",
            (snapshot_id, first, first + count),
        )
        return [json.loads(text) for (text,) in rows]

    def expire_snapshots(self, now: float | None = None) -> int:
        """Delete the snapshots past their expiry (and their rows); how many."""
        now = time.time() if now is None else now
        expired = [row[0] for row in self._read("SELECT id FROM snapshots WHERE expires <= ?", (now,))]
        for snapshot_id in expired:
            self._write(
                [
                    ("DELETE FROM snapshot_rows WHERE snapshot_id = ?", (snapshot_id,)),
                    ("DELETE FROM snapshots WHERE id = ?", (snapshot_id,)),
                ]
            )
        return len(expired)

    # changelog cursors

    def add_cursor(self, job_id: str, start: int) -> str:
        cursor_id = new_id("c")
        now = time.time()
        self._write(
            [
                ("INSERT INTO cursors VALUES (?, ?, 0, ?, ?)", (cursor_id, job_id, now, now)),
                ("INSERT INTO cursor_pages VALUES (?, 0, ?, NULL)", (cursor_id, start)),
            ]
        )
        return cursor_id

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

    def cursor_page(self, cursor_id: str, token: int) -> tuple[int, int | None] | None:
        """(start, stop) of a token's page (stop None: not served yet)."""
        rows = self._read(
            "SELECT start, stop FROM cursor_pages WHERE cursor_id = ? AND token = ?", (cursor_id, token)
        )
        return (int(rows[0][0]), None if rows[0][1] is None else int(rows[0][1])) if rows else None

    def serve_page(self, cursor_id: str, token: int, stop: int) -> None:
        """Record that token ``token``'s page ends at ``stop``: ``token + 1`` becomes current,
        starting there; pages older than ``token`` are forgotten (only the previous one is kept)."""
        self._write(
            [
                (
                    "UPDATE cursor_pages SET stop = ? WHERE cursor_id = ? AND token = ?",
                    (stop, cursor_id, token),
                ),
                ("INSERT INTO cursor_pages VALUES (?, ?, ?, NULL)", (cursor_id, token + 1, stop)),
                ("DELETE FROM cursor_pages WHERE cursor_id = ? AND token < ?", (cursor_id, token)),
                (
                    "UPDATE cursors SET current = ?, last_used = ? WHERE id = ?",
                    (token + 1, time.time(), cursor_id),
                ),
            ]
        )
