"""Checkpoints of a SQLite sink's write-ahead log, run beside the pipeline instead of in its commit.

In WAL mode a commit appends the batch's changed pages to the log and fsyncs it; that is what makes
the batch durable. With SQLite's automatic checkpoint the same ``COMMIT`` then copies those pages
into the database file (random writes and a second fsync) before it returns. At table scale that
copy is most of the commit: 50,000 random-key upserts into 10,000,000 rows wrote a 150 MB log,
and the commit took 0.64-0.75 s with the automatic checkpoint against 0.16-0.23 s without it, the
checkpoint itself 0.46-0.58 s (docs/spark.md, *Cost of a micro-batch at table scale*).

So the sink turns the automatic checkpoint off on its writer and asks a :class:`WalCheckpointer`
for a ``PASSIVE`` checkpoint after each commit: a thread with its own connection copies the pages
while Spark computes the next batch. A checkpoint changes neither what is durable (the log is)
nor what a reader sees (readers read through the log), only how long the log grows. ``PASSIVE``
never waits for the writer or a reader: frames it cannot copy yet stay for the next one. If a
checkpoint fails the log grows and the next request tries again; one warning is logged.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

LOG = logging.getLogger("upsertmat")


class WalCheckpointer:
    """One thread and one connection checkpointing the WAL of the SQLite file ``path`` on request.

    :meth:`request` is O(1) and never blocks: requests that arrive while a checkpoint runs fold into
    the next one. The thread starts at the first request; :meth:`close` ends it (any running
    checkpoint completes first). The writer's own close, as the file's last connection, checkpoints
    what is left and removes the log, as SQLite always does.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._changed = threading.Condition()
        self._requested = 0  # requests so far
        self._served = 0  # requests the last finished checkpoint covered
        self._closing = False
        self._warned = False
        self._thread: threading.Thread | None = None
        self.checkpoints = 0
        """Checkpoints completed (for tests and diagnostics)."""

    def request(self) -> None:
        """Ask for a checkpoint of everything committed so far."""
        with self._changed:
            if self._closing:
                return
            self._requested += 1
            self._changed.notify_all()
            if self._thread is None or not self._thread.is_alive():  # first request, or it failed
                self._thread = threading.Thread(
                    target=self._run, name="upsertmat-sqlite-checkpoint", daemon=True
                )
                self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a checkpoint that started after every request so far has finished (or the
        thread has ended); False on timeout."""
        with self._changed:
            return self._changed.wait_for(lambda: self._served >= self._requested, timeout)

    def close(self) -> None:
        """Stop the thread after its running checkpoint, if any. Idempotent."""
        with self._changed:
            self._closing = True
            self._changed.notify_all()
            thread, self._thread = self._thread, None
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            connection = sqlite3.connect(str(self._path), isolation_level=None)
            connection.execute("PRAGMA synchronous=FULL")  # the copy is fsynced before the log is reused
            while True:
                with self._changed:
                    self._changed.wait_for(lambda: self._closing or self._requested > self._served)
                    if self._closing:
                        return
                    covered = self._requested
                try:
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                except sqlite3.Error as error:
                    self._warn(error)
                with self._changed:
                    self._served = covered
                    self._changed.notify_all()
        except sqlite3.Error as error:
            self._warn(error)
        finally:
            if connection is not None:
                connection.close()
            with self._changed:
                self._served = self._requested  # nobody waits for a thread that has ended
                self._changed.notify_all()

    def _warn(self, error: sqlite3.Error) -> None:
        if not self._warned:
            self._warned = True
            LOG.warning(
                "upsertmat: cannot checkpoint the SQLite sink's write-ahead log %s-wal (%s); it grows "
                "until a later checkpoint succeeds",
                self._path,
                error,
            )
