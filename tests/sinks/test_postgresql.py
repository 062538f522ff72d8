"""The shared sink suite on the PostgreSQL sink (a throw-away server on 127.0.0.1); read back with
plain SQL through psycopg, each test in a database of its own."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from .suite import BatchSinkTests, Row

_databases = itertools.count()


class TestPostgresSink(BatchSinkTests):
    kind_name = "postgresql"
    changelog_positions_dense = True

    @pytest.fixture
    def sink_url(self, postgres_url: str) -> Iterator[str]:
        import psycopg

        name = f"suite_{next(_databases)}"
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        self._url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
        yield self._url

    def url(self, tmp_path: Path) -> str:
        return getattr(self, "_url", "postgresql://localhost/none")

    def independent_rows(self, url: str, table: str) -> list[Row]:
        import psycopg

        with psycopg.connect(url) as connection:
            return [tuple(row) for row in connection.execute(f'SELECT * FROM "{table}"').fetchall()]
