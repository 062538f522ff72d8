"""Keyed tables for the demo: the expected table, a blind upsert sink, reading SQLite, comparing.

A table maps the sink key ``id`` to the row ``(id, level, badge)``. O(changes) to build,
O(keys) to compare.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from .workload import COLUMNS, DemoChange

Table = dict[int, tuple[object, ...]]
TableView = Mapping[int, tuple[object, ...]]


def expected_table(logical: Iterable[DemoChange]) -> Table:
    """The sink table the logical (ordered) changelog produces.

    In logical order every ``-U`` is followed by the ``+U`` of the same key, so an ADD sets the
    key's row and a RETRACT removes it.
    """
    table: Table = {}
    for change in logical:
        if change.op in ("+I", "+U"):
            table[change.id] = change.row
        else:
            table.pop(change.id, None)
    return table


def blind_upsert(arrival: Iterable[DemoChange]) -> Table:
    """What an upsert sink without a materializer ends with: ``+I``/``+U`` upsert, ``-U``/``-D`` delete."""
    return expected_table(arrival)


def read_sqlite_table(path: Path, table: str) -> Table:
    """The demo table as stored in a SQLite database (raises sqlite3.Error if absent)."""
    with sqlite3.connect(path) as connection:
        cursor = connection.execute(f'SELECT {", ".join(COLUMNS)} FROM "{table}"')
        return {row[0]: tuple(row) for row in cursor}


def _exact(row: tuple[object, ...] | None) -> tuple[tuple[type, object], ...] | None:
    return None if row is None else tuple((type(value), value) for value in row)


def disagreements(actual: TableView, expected: TableView) -> list[int]:
    """Keys whose row differs (wrong values or types, missing or extra), sorted. ``1 != 1.0`` here."""
    keys = actual.keys() | expected.keys()
    return sorted(key for key in keys if _exact(actual.get(key)) != _exact(expected.get(key)))
