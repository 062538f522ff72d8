"""The SQL sinks apply a batch's statements in primary-key order (``in_key_order``): the table a
batch leaves is unchanged, only the walk over the B-tree is (docs/spark.md, the cost model)."""

from __future__ import annotations

import re
from pathlib import Path

from upsertmat.sinks.base import Column
from upsertmat.sinks.sql import in_key_order
from upsertmat.sinks.sqlite import SqliteSink


def test_rows_are_sorted_by_a_single_or_a_composite_key() -> None:
    rows = [(3, "c", 1), (1, "b", 2), (2, "a", 3)]
    assert in_key_order(rows, (0,)) == [(1, "b", 2), (2, "a", 3), (3, "c", 1)]
    assert in_key_order(rows, (1,)) == [(2, "a", 3), (1, "b", 2), (3, "c", 1)]
    assert in_key_order([(1, "b"), (0, "z"), (1, "a")], (0, 1)) == [(0, "z"), (1, "a"), (1, "b")]


def test_keys_that_do_not_compare_are_left_in_the_order_given() -> None:
    rows = [(None, 1), (2, 2), ("x", 3)]
    assert in_key_order(rows, (0,)) == rows
    assert in_key_order([(1, None), (1, 2)], (0, 1)) == [(1, None), (1, 2)]


def test_the_sqlite_sink_upserts_and_deletes_in_key_order(tmp_path: Path) -> None:
    columns = [Column("id", "bigint"), Column("name", "string")]
    sink = SqliteSink(tmp_path / "sink.db", "t", columns, (0,))
    statements: list[str] = []
    sink._db.set_trace_callback(statements.append)
    changes = [("+I", (key, f"n{key}")) for key in (5, 1, 4, 2, 3)]
    changes += [("-D", (key, f"n{key}")) for key in (9, 7, 8)]
    sink.apply_batch("q", 0, changes)
    sink._db.set_trace_callback(None)

    def keys(verb: str) -> list[int]:
        found = [re.search(r"VALUES \((\d+)|WHERE .*= (\d+)", s) for s in statements if s.startswith(verb)]
        return [int(next(group for group in match.groups() if group)) for match in found if match]

    assert keys('INSERT INTO "t"') == [1, 2, 3, 4, 5]
    assert keys("DELETE") == [7, 8, 9]
    assert sorted(sink.rows()) == [(key, f"n{key}") for key in range(1, 6)]
    sink.close()
