"""The recorded changelog and the pinned snapshot on a real PostgreSQL sink (psycopg)."""

from __future__ import annotations

import pytest

from upsertmat.sinks import Column, last_position, open_sink, read_changes, read_snapshot

pytestmark = [pytest.mark.spark]


def test_postgres_sink_records_changes_and_reads_a_snapshot(postgres_url: str) -> None:
    columns = (Column("id", "bigint"), Column("v", "string"))
    sink = open_sink(postgres_url, "results_pg", columns, (0,), changelog=True)
    try:
        sink.apply_batch("q", 0, [("+I", (1, "a")), ("+I", (2, "b"))])
        sink.apply_batch("q", 1, [("+U", (1, "a2")), ("-D", (2, "b"))])
    finally:
        sink.close()
    changes = read_changes(postgres_url, "results_pg", 0, 100)
    assert [(c.pos, c.batch_id, c.op, c.row) for c in changes] == [
        (1, 0, "+I", (1, "a")),
        (2, 0, "+I", (2, "b")),
        (3, 1, "-D", (2, "b")),
        (4, 1, "-U", (1, "a")),
        (5, 1, "+U", (1, "a2")),
    ]
    snapshot = read_snapshot(postgres_url, "results_pg", ("id",))
    assert (snapshot.batch_id, snapshot.rows, snapshot.total, snapshot.changes_pos) == (1, ((1, "a2"),), 1, 5)
    assert last_position(postgres_url, "results_pg") == 5


def test_postgres_before_images_of_many_keys_with_a_composite_key(postgres_url: str) -> None:
    columns = (Column("a", "bigint"), Column("b", "string"), Column("x", "double"))
    sink = open_sink(postgres_url, "results_pg_wide", columns, (0, 1), changelog=True)
    keys = [(number, f"k{number % 7}") for number in range(900)]  # more keys than one lookup statement
    try:
        sink.apply_batch("q-wide", 0, [("+I", (*key, 0.0)) for key in keys])  # batch ids are per query
        sink.apply_batch(
            "q-wide", 1, [("+U", (*key, 1.0 if number % 2 else 0.0)) for number, key in enumerate(keys)]
        )
    finally:
        sink.close()
    second = [(c.op, c.row) for c in read_changes(postgres_url, "results_pg_wide", 900, 10_000)]
    odd = [key for number, key in enumerate(keys) if number % 2]
    assert second == [change for key in odd for change in (("-U", (*key, 0.0)), ("+U", (*key, 1.0)))]
