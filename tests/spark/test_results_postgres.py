"""The recorded changelog and the pinned snapshot on a real PostgreSQL sink (psycopg)."""

from __future__ import annotations

import pytest

from upsertmat.spark.results import last_position, read_changes, read_snapshot
from upsertmat.spark.sink import Column, open_sink

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
