"""The Arrow side the lakehouse sinks share: the table schema of the sink's columns, reading
Arrow tables into rows ordered by key, and an Arrow column's values as Python objects
(:func:`column_values`, also the pipeline's). pyarrow is imported inside the functions (the
``spark`` extra installs it)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
    return list(column_rows(data, names))


def column_rows(data: Any, names: Sequence[str]) -> Iterator[Row]:
    """The rows of the Arrow table ``data``'s ``names`` columns, in table order, each a tuple of
    the columns' :func:`column_values`. O(rows x columns)."""
    return zip(*(column_values(data.column(name)) for name in names), strict=True)


def column_values(array: Any) -> list[Any]:
    """The values of a pyarrow ``Array`` or ``ChunkedArray`` as Python objects: exactly the list
    ``array.to_pylist()`` gives (the same values of the same types, ``None`` for a null).

    Where NumPy's conversion gives that same list, it is used: integers and 32/64-bit floats
    without nulls, booleans, strings and binaries (their nulls are ``None`` there too); any other
    type, or an integer or float column with a null (NumPy would make it a float NaN), goes
    through ``to_pylist``. Why: pyarrow before 20 converts element by element (pypaimon 2.1 pins
    pyarrow < 20, so an install with the ``lakehouse`` extra has it), ~7x slower than NumPy's
    loop over the whole buffer: 100,000 64-bit integers in ~42 ms against ~2 ms, which doubled
    the pipeline's map stage (reading, parsing and packing a batch: docs/benchmarks.md, *The
    Spark pipeline*). O(len(array))."""
    import pyarrow as pa

    kind = array.type
    if (
        pa.types.is_boolean(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or (array.null_count == 0 and (pa.types.is_integer(kind) or kind in (pa.float32(), pa.float64())))
    ):
        values: list[Any] = array.to_numpy(zero_copy_only=False).tolist()
        return values
    converted: list[Any] = array.to_pylist()
    return converted


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
