"""The shared sink suite on the SQLite sink; read back with plain SQL through the sqlite3 module."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .suite import BatchSinkTests, Row


class TestSqliteSink(BatchSinkTests):
    kind_name = "sqlite"
    changelog_positions_dense = True
    sqlite_values = True

    def url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'sink.db'}"

    def independent_rows(self, url: str, table: str) -> list[Row]:
        with sqlite3.connect(url.removeprefix("sqlite:///")) as connection:
            return [tuple(row) for row in connection.execute(f'SELECT * FROM "{table}"')]
