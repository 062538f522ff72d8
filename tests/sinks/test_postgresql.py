"""The shared sink suite on the PostgreSQL sink (a throw-away server on 127.0.0.1); read back with
plain SQL through psycopg, each test in a database of its own."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..spark.postgres import new_database
from .suite import BatchSinkTests, Row


class TestPostgresSink(BatchSinkTests):
    kind_name = "postgresql"
    changelog_positions_dense = True

    @pytest.fixture
    def sink_url(self, postgres_url: str) -> Iterator[str]:
        self._url = new_database(postgres_url, "suite")
        yield self._url

    def url(self, tmp_path: Path) -> str:
        return getattr(self, "_url", "postgresql://localhost/none")

    def independent_rows(self, url: str, table: str) -> list[Row]:
        import psycopg

        with psycopg.connect(url) as connection:
            return [tuple(row) for row in connection.execute(f'SELECT * FROM "{table}"').fetchall()]


def test_created_table_updates_rows_in_place(postgres_url: str) -> None:
    """The sink creates its table with fillfactor 90 (upsertmat.sinks.postgresql.FILLFACTOR), so
    updates of rows spread over its pages are HOT: every one of them, where at the default 100
    a full page has no room and the new version moves (and gets an index entry)."""
    import psycopg

    from upsertmat.sinks.base import Column
    from upsertmat.sinks.postgresql import FILLFACTOR, PostgresSink

    url = new_database(postgres_url, "hot")
    columns = [Column("id", "bigint"), Column("version", "bigint"), Column("payload", "string")]

    def row(key: int, version: int) -> tuple[int, int, str]:
        return (key, version, f"{version:08d}-{key:015d}")

    sink = PostgresSink(url, "t", columns, [0])
    try:
        sink.apply_batch("q", 0, [("+I", row(key, 0)) for key in range(2_000)])
        sink.apply_batch("q", 1, [("+U", row(key, 1)) for key in range(0, 2_000, 20)])
    finally:
        sink.close()  # the server counts the session's updates when it ends
    with psycopg.connect(url, autocommit=True) as connection:
        options = connection.execute("SELECT reloptions FROM pg_class WHERE relname = 't'").fetchone()
        assert options == ([f"fillfactor={FILLFACTOR}"],)
        counts = None
        for _ in range(100):
            counts = connection.execute(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 't'"
            ).fetchone()
            if counts is not None and counts[0] == 100:
                break
            time.sleep(0.1)
        assert counts == (100, 100)
