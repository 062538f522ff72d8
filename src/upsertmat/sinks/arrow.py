"""The Arrow side the lakehouse sinks share: the table schema of the sink's columns, and reading
Arrow tables into rows ordered by key. pyarrow is imported inside the functions (the ``spark``
extra installs it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..spec.changes import Row
from .base import Column, NetBatch, SinkError

ARROW_TYPES = {"bigint": "int64", "int": "int64", "double": "float64", "boolean": "bool", "string": "string"}
"""Spark column type -> Arrow type of the table (integers 64 bits, as the SQL sinks store them)."""


def arrow_schema(columns: Sequence[Column]) -> Any:
    """The table's pyarrow schema; SinkError naming the supported types for any other column."""
    import pyarrow as pa  # type: ignore[import-untyped]

    fields = []
    for column in columns:
        if column.spark_type not in ARROW_TYPES:
            raise SinkError(
                f"column {column.name!r} has type {column.spark_type}; "
                f"the sink supports {sorted(ARROW_TYPES)}"
            )
        fields.append(pa.field(column.name, pa.type_for_alias(ARROW_TYPES[column.spark_type])))
    return pa.schema(fields)


def sorted_rows(data: Any, names: Sequence[str], keys: Sequence[str], limit: int | None = None) -> list[Row]:
    """The rows of the Arrow table ``data`` (its ``names`` columns), ordered by ``keys``, at most
    ``limit``. O(rows log rows)."""
    data = data.select(list(names))
    if keys:
        data = data.sort_by([(key, "ascending") for key in keys])
    if limit is not None:
        data = data.slice(0, limit)
    return [tuple(row) for row in zip(*(data.column(name).to_pylist() for name in names), strict=True)]


def columns_of(rows: Sequence[Row], schema: Any) -> Any:
    """``rows`` (tuples in the schema's column order) as an Arrow table of ``schema``. O(rows)."""
    import pyarrow as pa

    columns: list[tuple[Any, ...]] = list(zip(*rows, strict=True)) if rows else [() for _ in schema]
    return pa.Table.from_arrays(
        [pa.array(values, type=field.type) for values, field in zip(columns, schema, strict=True)],
        schema=schema,
    )


def net_arrays(schema: Any, pk: Sequence[int], batch: NetBatch) -> list[Any]:
    """The Arrow arrays (one per column of ``schema``) of ``batch``'s upserts, then of its deletes:
    each delete a row holding its key (``pk``: the key columns' indexes), its other columns null.
    The sink adds its own op column. O(rows)."""
    import pyarrow as pa

    columns: list[list[Any]] = [[] for _ in schema]
    for row in batch.upserts:
        for index, value in enumerate(row):
            columns[index].append(value)
    for key in batch.deletes:
        for index in range(len(columns)):
            columns[index].append(key[pk.index(index)] if index in pk else None)
    return [pa.array(values, type=field.type) for values, field in zip(columns, schema, strict=True)]
