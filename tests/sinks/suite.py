"""The suite every sink kind passes (zarr's ``StoreTests`` style): a test file per sink subclasses
:class:`BatchSinkTests` in a few lines, naming its URL and an independent reader of its table.

What it checks, per sink, without Spark (the pipeline drives the same object from ``foreachBatch``):
exactly once on replay (a batch id at or below the committed one is skipped), empty batches, the
last change per key of a batch, values kept exactly (``-0.0``, NaN, booleans, nulls, 64-bit
integers, text outside ASCII), a composite primary key, a table of other columns refused, the
committed table read back by the sink's kind (snapshot, changes, last batch and position) and by
a reader that is not the writer's library, the table dropped with its bookkeeping, and a SIGKILL
at each kill point of the commit (:data:`upsertmat.sinks.base.KILL_POINTS`) leaving the batch
either whole or absent, with the rerun exact.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import pytest

from upsertmat.sinks import Column, SinkError, SinkKind, kind_of, open_sink
from upsertmat.sinks.base import KILL_POINT_VARIABLE, KILL_POINTS

COLUMNS = (Column("id", "bigint"), Column("name", "string"), Column("x", "double"), Column("flag", "boolean"))
PK = (0, 1)
TABLE = "t"
Row = tuple[Any, ...]


def by_key(rows: list[Row]) -> list[Row]:
    """Rows ordered by the suite's primary key (id, name)."""
    return sorted(rows, key=lambda row: (row[0], row[1]))


def same(left: list[Row], right: list[Row]) -> bool:
    """Rows equal value for value and type for type (NaN equal to NaN, -0.0 apart from 0.0)."""

    def canonical(value: Any) -> Any:
        if isinstance(value, float):
            return ("float", "nan" if math.isnan(value) else repr(value))
        return (type(value).__name__, value)

    return [tuple(map(canonical, row)) for row in left] == [tuple(map(canonical, row)) for row in right]


FIRST = [
    ("+I", (1, "a", 0.5, True)),
    ("+I", (1, "b", -0.0, None)),
    ("+I", (2, "a", None, False)),
    ("+I", (-(2**63), "ünï ☃", float("nan"), True)),
    ("+I", (2**63 - 1, "", 1e300, False)),
]
SECOND = [
    ("-U", (1, "a", 0.5, True)),
    ("+U", (1, "a", 1.5, True)),
    ("-D", (1, "b", -0.0, None)),
    ("-U", (2, "a", None, False)),
    ("+U", (2, "a", None, False)),  # rewritten unchanged: no table change
    ("+I", (3, "c", 2.0, None)),
    ("-D", (3, "c", 2.0, None)),  # added and deleted in one batch: absent
    ("-D", (9, "z", 0.0, None)),  # a key the table never held
]
AFTER_FIRST = by_key([row for _, row in FIRST])
AFTER_SECOND = by_key(
    [
        (1, "a", 1.5, True),
        (2, "a", None, False),
        (-(2**63), "ünï ☃", float("nan"), True),
        (2**63 - 1, "", 1e300, False),
    ]
)


APPLY_BATCHES = (
    "import json, sys\n"
    "from upsertmat.sinks import Column, open_sink\n"
    "url, columns, pk, batches = sys.argv[1], *map(json.loads, sys.argv[2:])\n"
    f"sink = open_sink(url, {TABLE!r}, [Column(*column) for column in columns], pk)\n"
    "for batch, changes in batches:\n"
    "    sink.apply_batch('q', batch, [(op, tuple(row)) for op, row in changes])\n"
)
"""A process applying batches ``[[id, [[op, row], ...]], ...]`` to a sink, as the pipeline's
driver does: argv URL, columns, primary key, batches (JSON)."""


class BatchSinkTests:
    """Subclass with :meth:`url` and :meth:`independent_rows`; every test runs on that sink."""

    kind_name: ClassVar[str]
    changelog_positions_dense: ClassVar[bool] = False
    """True where positions count 1, 2, ... (the SQL sinks)."""
    sqlite_values: ClassVar[bool] = False
    """True where the database keeps values as SQLite does (docs/spark.md, *Sinks*): no boolean
    type (0/1, read back as integers), no NaN (NULL), no negative zero."""

    def stored(self, rows: list[Row]) -> list[Row]:
        """``rows`` as the table holds them."""
        if not self.sqlite_values:
            return rows

        def kept(value: Any) -> Any:
            if isinstance(value, bool):
                return int(value)
            if isinstance(value, float) and math.isnan(value):
                return None
            return 0.0 if value == 0.0 and isinstance(value, float) else value

        return [tuple(map(kept, row)) for row in rows]

    def url(self, tmp_path: Path) -> str:
        raise NotImplementedError

    def independent_rows(self, url: str, table: str) -> list[Row]:
        """The table's rows read without the sink's own library (ordered by the suite's key)."""
        raise NotImplementedError

    @pytest.fixture
    def sink_url(self, tmp_path: Path) -> str:
        return self.url(tmp_path)

    @property
    def kind(self) -> SinkKind:
        return kind_of(self.url(Path("/nowhere")))

    def test_the_url_names_this_kind(self, sink_url: str) -> None:
        assert kind_of(sink_url).name == self.kind_name
        kind_of(sink_url).check(sink_url)

    def test_a_replayed_batch_is_skipped_and_the_last_change_per_key_wins(self, sink_url: str) -> None:
        sink = open_sink(sink_url, TABLE, COLUMNS, PK)
        try:
            assert not sink.apply_batch("q", 0, FIRST).skipped
            outcome = sink.apply_batch("q", 1, SECOND)
            assert (outcome.upserts, outcome.deletes, outcome.skipped) == (2, 3, False)
            assert sink.apply_batch("q", 1, [("-D", (1, "a", 1.5, True))]).skipped  # replayed: a no-op
            assert sink.apply_batch("q", 0, FIRST).skipped  # an earlier batch too
            assert same(sink.rows(), self.stored(AFTER_SECOND))
            assert sink.committed_batches() == 2
        finally:
            sink.close()
        assert same(by_key(self.independent_rows(sink_url, TABLE)), self.stored(AFTER_SECOND))

    def test_an_empty_batch_changes_nothing_and_is_committed_where_the_kind_records_it(
        self, sink_url: str
    ) -> None:
        sink = open_sink(sink_url, TABLE, COLUMNS, PK)
        try:
            sink.apply_batch("q", 0, FIRST)
            outcome = sink.apply_batch("q", 1, [])
            assert (outcome.upserts, outcome.deletes, outcome.skipped) == (0, 0, False)
            recorded = type(sink).marks_empty_batches
            assert sink.committed_batches() == (2 if recorded else 1)
            assert self.kind.last_batch(sink_url, TABLE) == (1 if recorded else 0)
            assert same(sink.rows(), self.stored(AFTER_FIRST))
        finally:
            sink.close()

    def test_the_committed_table_reads_back_through_the_kind(self, sink_url: str) -> None:
        kind = self.kind
        assert kind.last_batch(sink_url, TABLE) is None and kind.last_position(sink_url, TABLE) == 0
        assert kind.snapshot(sink_url, TABLE, ["id", "name"]).batch_id is None
        sink = open_sink(sink_url, TABLE, COLUMNS, PK, changelog=True)
        try:
            sink.apply_batch("q", 0, FIRST)
            sink.apply_batch("q", 1, SECOND)
        finally:
            sink.close()
        snapshot = kind.snapshot(sink_url, TABLE, ["id", "name"])
        assert snapshot.batch_id == 1 and snapshot.total == len(AFTER_SECOND)
        assert snapshot.columns == ("id", "name", "x", "flag")
        assert same(list(snapshot.rows), self.stored(AFTER_SECOND))
        assert same(
            list(kind.snapshot(sink_url, TABLE, ["id", "name"], limit=2).rows), self.stored(AFTER_SECOND)[:2]
        )
        header = kind.snapshot(sink_url, TABLE, ["id", "name"], limit=0)  # what a status shows
        assert (header.batch_id, header.rows, header.total) == (1, (), len(AFTER_SECOND))
        changes = kind.changes(sink_url, TABLE, 0, 1000)
        assert [(c.batch_id, c.op) for c in changes] == [(0, "+I")] * 5 + [(1, "-D"), (1, "-U"), (1, "+U")]
        before = self.stored([(1, "b", -0.0, None), (1, "a", 0.5, True)])  # read from the table
        assert same([c.row for c in changes[5:]], [*before, (1, "a", 1.5, True)])
        assert same(by_key([c.row for c in changes[:5]]), AFTER_FIRST)
        positions = [c.pos for c in changes]
        assert positions == sorted(set(positions))  # increasing
        if self.changelog_positions_dense:
            assert positions == list(range(1, len(changes) + 1))
        assert kind.last_position(sink_url, TABLE) == positions[-1] == snapshot.changes_pos
        assert [c.pos for c in kind.changes(sink_url, TABLE, positions[4], 2)] == positions[5:7]  # paged
        assert [c.pos for c in kind.changes(sink_url, TABLE, 0, 100, upto=positions[4])] == positions[:5]

    def test_a_table_of_other_columns_is_refused(self, sink_url: str) -> None:
        open_sink(sink_url, TABLE, COLUMNS, PK).close()
        with pytest.raises(
            SinkError, match=r"has columns \['id', 'name', 'x', 'flag'\], the job writes \['id', 'z'\]"
        ):
            open_sink(sink_url, TABLE, [Column("id", "bigint"), Column("z", "string")], (0,)).close()

    def test_an_unsupported_column_type_is_refused(self, sink_url: str) -> None:
        with pytest.raises(SinkError, match="column 'when' has type timestamp"):
            open_sink(sink_url, TABLE, [Column("id", "bigint"), Column("when", "timestamp")], (0,)).close()

    def test_dropping_removes_the_table_and_its_bookkeeping(self, sink_url: str) -> None:
        sink = open_sink(sink_url, TABLE, COLUMNS, PK, changelog=True)
        try:
            sink.apply_batch("q", 0, FIRST)
            sink.apply_batch("q", 1, SECOND)
        finally:
            sink.close()
        self.kind.drop(sink_url, TABLE)
        self.kind.drop(sink_url, TABLE)  # nothing left: a no-op
        assert self.kind.last_batch(sink_url, TABLE) is None
        assert self.kind.snapshot(sink_url, TABLE, ["id", "name"]).total == 0
        assert self.kind.changes(sink_url, TABLE, 0, 100) == []
        again = open_sink(sink_url, TABLE, COLUMNS, PK)  # a job writing it again starts from nothing
        try:
            assert not again.apply_batch("q", 0, SECOND[:2]).skipped
            assert same(again.rows(), self.stored([(1, "a", 1.5, True)]))
        finally:
            again.close()

    @pytest.mark.parametrize("point", KILL_POINTS)
    def test_a_kill_inside_the_commit_leaves_the_batch_whole_or_absent(
        self, sink_url: str, point: str
    ) -> None:
        open_sink(sink_url, TABLE, COLUMNS, PK).close()
        applying = APPLY_BATCHES
        batches = json.dumps(
            [[0, [[op, [*row]] for op, row in FIRST[:3]]], [1, [[op, [*row]] for op, row in SECOND]]]
        )
        columns = json.dumps([[column.name, column.spark_type] for column in COLUMNS])
        environment = {**os.environ, KILL_POINT_VARIABLE: f"{point}:1"}
        killed = subprocess.run(
            [sys.executable, "-c", applying, sink_url, columns, json.dumps(PK), batches],
            env=environment,
            capture_output=True,
            timeout=120,
        )
        assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
        first = by_key([row for _, row in FIRST[:3]])
        second = [(1, "a", 1.5, True), (2, "a", None, False)]
        expected, last = (first, 0) if point == "before-commit" else (second, 1)
        assert same(by_key(self.independent_rows(sink_url, TABLE)), self.stored(expected))
        assert self.kind.last_batch(sink_url, TABLE) == last
        rerun = subprocess.run(
            [sys.executable, "-c", applying, sink_url, columns, json.dumps(PK), batches],
            capture_output=True,
            timeout=120,
        )  # the rerun Spark makes: the same batches again, each applied once
        assert rerun.returncode == 0, rerun.stderr.decode()
        assert same(by_key(self.independent_rows(sink_url, TABLE)), self.stored(second))
        assert self.kind.last_batch(sink_url, TABLE) == 1
