"""The sinks' recorded results without Spark: each batch's table changes in its transaction, snapshots
and changelog reads (across chunks, before-images of many keys), SQLite URLs. Real SQLite files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from upsertmat.sinks import (
    Column,
    SinkUrlError,
    last_position,
    open_sink,
    read_changes,
    read_snapshot,
    resolve_url,
)
from upsertmat.sinks.sql import BATCHES_TABLE, CHANGES_TABLE
from upsertmat.sinks.sqlite import sqlite_path

COLUMNS = (Column("id", "bigint"), Column("v", "string"), Column("x", "double"))


def test_sink_records_each_batch_table_changes_in_its_transaction(tmp_path: Path) -> None:
    url = str(tmp_path / "sink.db")
    sink = open_sink(url, "t", COLUMNS, (0,), changelog=True)
    assert read_snapshot(url, "t", ("id",)).batch_id is None
    sink.apply_batch("q", 0, [("+I", (1, "a", 1.0)), ("+I", (2, "b", 2.0)), ("+I", (3, "c", 3.0))])
    # batch 1: key 1 changes, key 2 is deleted, key 3 is rewritten unchanged, key 4 comes and goes
    sink.apply_batch(
        "q",
        1,
        [
            ("+U", (1, "a2", 1.0)),
            ("-D", (2, "b", 2.0)),
            ("+U", (3, "c", 3.0)),
            ("+I", (4, "d", 0.0)),
            ("-D", (4, "d", 0.0)),
        ],
    )
    assert sink.apply_batch("q", 1, [("+I", (9, "z", 9.0))]).skipped  # a re-run batch records nothing
    changes = read_changes(url, "t", 0, 100)
    assert [(c.pos, c.batch_id, c.op, c.row) for c in changes] == [
        (1, 0, "+I", (1, "a", 1.0)),
        (2, 0, "+I", (2, "b", 2.0)),
        (3, 0, "+I", (3, "c", 3.0)),
        (4, 1, "-D", (2, "b", 2.0)),
        (5, 1, "-U", (1, "a", 1.0)),
        (6, 1, "+U", (1, "a2", 1.0)),
    ]
    assert [c.pos for c in read_changes(url, "t", 2, 2)] == [3, 4]
    assert [c.pos for c in read_changes(url, "t", 3, 100, upto=5)] == [4, 5]
    snapshot = read_snapshot(url, "t", ("id",), limit=1)
    assert (snapshot.batch_id, snapshot.total, snapshot.rows, snapshot.changes_pos) == (
        1,
        2,
        ((1, "a2", 1.0),),
        6,
    )
    assert snapshot.columns == ("id", "v", "x") and last_position(url, "t") == 6
    sink.close()
    with sqlite3.connect(url) as db:  # the changes sit beside the batch ids, in the same database
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {BATCHES_TABLE, CHANGES_TABLE, "t"} <= tables


def test_a_sink_without_changelog_records_none_and_missing_databases_read_empty(tmp_path: Path) -> None:
    url = str(tmp_path / "plain.db")
    assert read_changes(url, "t", 0, 10) == [] and last_position(url, "t") == 0
    assert not Path(url).exists()  # reading never creates the database
    sink = open_sink(url, "t", COLUMNS, (0,))
    sink.apply_batch("q", 0, [("+I", (1, "a", 1.0))])
    sink.close()
    assert read_changes(url, "t", 0, 10) == []
    assert read_snapshot(url, "t", ("id",)).rows == ((1, "a", 1.0),)


def test_sqlite_urls_follow_sqlalchemy(tmp_path: Path) -> None:
    assert sqlite_path("sqlite:////abs/x.db") == Path("/abs/x.db")
    assert sqlite_path("sqlite:///rel/x.db") == Path("rel/x.db")
    assert sqlite_path("sqlite:///rel/x.db", tmp_path) == tmp_path / "rel/x.db"
    assert resolve_url("x.db", tmp_path) == str(tmp_path / "x.db")
    assert resolve_url("postgresql://u@h/db", tmp_path) == "postgresql://u@h/db"
    for bad in ("sqlite://x.db", "sqlite:", "sqlite:///", "mysql://h/db", ""):
        with pytest.raises(SinkUrlError):
            sqlite_path(bad)


def test_before_images_of_many_keys_with_a_composite_key(tmp_path: Path) -> None:
    url = str(tmp_path / "wide.db")
    columns = (Column("a", "bigint"), Column("b", "string"), Column("v", "bigint"))
    sink = open_sink(url, "w", columns, (0, 1), changelog=True)
    keys = [(number, f"k{number % 7}") for number in range(900)]  # more keys than one lookup statement
    sink.apply_batch("q", 0, [("+I", (*key, 0)) for key in keys])
    sink.apply_batch("q", 1, [("+U", (*key, 1 if number % 2 else 0)) for number, key in enumerate(keys)])
    sink.close()
    second = [(c.op, c.row) for c in read_changes(url, "w", 900, 10_000)]
    odd = [key for number, key in enumerate(keys) if number % 2]
    assert second == [change for key in odd for change in (("-U", (*key, 0)), ("+U", (*key, 1)))]


def test_changes_are_read_across_chunks(tmp_path: Path) -> None:
    url = str(tmp_path / "chunks.db")
    sink = open_sink(url, "c", (Column("id", "bigint"), Column("x", "double")), (0,), changelog=True)
    sink.apply_batch("q", 0, [("+I", (number, float(number))) for number in range(2500)])  # 3 chunks
    sink.apply_batch("q", 1, [("+I", (-1, float("nan"))), ("+I", (-2, -0.0))])
    sink.close()
    assert [c.pos for c in read_changes(url, "c", 995, 10)] == list(range(996, 1006))
    assert [c.pos for c in read_changes(url, "c", 1998, 1000, upto=2001)] == [1999, 2000, 2001]
    tail = read_changes(url, "c", 2500, 10)
    assert [(c.pos, c.batch_id, c.row[0]) for c in tail] == [(2501, 1, -1), (2502, 1, -2)]
    assert tail[0].row[1] != tail[0].row[1] and str(tail[1].row[1]) == "-0.0"  # NaN and -0.0 kept
    assert last_position(url, "c") == 2502 and read_snapshot(url, "c", ("id",)).changes_pos == 2502
