"""The SQLite sink's write-ahead log is checkpointed by a thread of its own, not by the commit
(``upsertmat.sinks.sqlite_checkpoint``): what a commit makes durable and what readers see are
unchanged, the log's pages reach the database file after the commit, and close ends the thread."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import pytest

from upsertmat.sinks.base import Column
from upsertmat.sinks.sqlite import SqliteSink
from upsertmat.sinks.sqlite_checkpoint import WalCheckpointer

COLUMNS = [Column("id", "bigint"), Column("name", "string")]


def file_rows(path: Path) -> list[tuple[int, str]]:
    """The table as the database file alone holds it: ``immutable`` makes SQLite ignore the log."""
    with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as reader:
        return sorted(reader.execute('SELECT * FROM "t"').fetchall())


def test_the_commit_leaves_the_copy_to_the_checkpointer_which_copies_every_batch(tmp_path: Path) -> None:
    path = tmp_path / "sink.db"
    sink = SqliteSink(path, "t", COLUMNS, (0,))
    assert sink._db.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    for batch in range(3):
        sink.apply_batch(
            "q", batch, [("+I", (key, f"v{batch}")) for key in range(batch * 10, batch * 10 + 10)]
        )
    assert sink._checkpointer.wait(30)
    assert sink._checkpointer.checkpoints >= 1
    expected = [(key, f"v{key // 10}") for key in range(30)]
    assert file_rows(path) == expected == sorted(sink.rows())
    sink.close()
    assert not [thread for thread in threading.enumerate() if "sqlite-checkpoint" in thread.name]
    assert not Path(f"{path}-wal").exists()  # the last connection's close checkpointed and removed it


def test_a_reader_holding_a_snapshot_delays_the_copy_but_sees_no_change(tmp_path: Path) -> None:
    path = tmp_path / "sink.db"
    sink = SqliteSink(path, "t", COLUMNS, (0,))
    sink.apply_batch("q", 0, [("+I", (1, "first"))])
    assert sink._checkpointer.wait(30)
    reader = sqlite3.connect(str(path), isolation_level=None)
    reader.execute("BEGIN")
    assert reader.execute('SELECT * FROM "t"').fetchall() == [(1, "first")]
    sink.apply_batch("q", 1, [("+U", (1, "second"))])
    assert sink._checkpointer.wait(30)
    assert reader.execute('SELECT * FROM "t"').fetchall() == [(1, "first")]  # its snapshot
    assert file_rows(path) == [(1, "first")]  # PASSIVE: not copied past the reader's snapshot
    reader.execute("COMMIT")
    reader.close()
    sink.apply_batch("q", 2, [("+U", (2, "third"))])
    assert sink._checkpointer.wait(30)
    assert file_rows(path) == [(1, "second"), (2, "third")]
    sink.close()


def test_a_checkpointer_that_cannot_open_the_file_warns_once_and_never_blocks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    checkpointer = WalCheckpointer(tmp_path / "missing" / "sink.db")
    with caplog.at_level(logging.WARNING, logger="upsertmat"):
        for _ in range(3):
            checkpointer.request()
            assert checkpointer.wait(30)
    checkpointer.close()
    assert checkpointer.checkpoints == 0
    warnings = [record for record in caplog.records if "write-ahead log" in record.getMessage()]
    assert len(warnings) == 1 and "missing" in warnings[0].getMessage()
