"""Pack a micro-batch's changes per key bucket before the shuffle (``mapInArrow``).

pyspark's Row-API ``transformWithState`` converts every input row, and every cell of it, to
Python objects one at a time (about 5 µs per row with a key and one value column), and the JVM
shuffles and sorts every row. With key buckets the processor only needs each bucket's changes as
a whole, so :func:`pack_changes` runs first, in ``DataFrame.mapInArrow`` (columnar: pyarrow
converts a whole column at once): per Arrow batch of the source (at most
``spark.sql.execution.arrow.maxRecordsPerBatch`` rows) and bucket it emits ONE row
``(bucket, records)`` whose ``records`` is a msgpack array of the batch's changes of that
bucket, each ``[arrival, op, ts (if any), *row columns]``. The shuffle and the processor then
see (buckets x source batches) rows instead of one per change.

Exactness: msgpack keeps integers, floats (IEEE doubles, NaN and -0.0 included), booleans,
strings and nulls with their types, so only columns of those Spark types are packed
(:data:`PACKABLE_TYPES`; :func:`packable`). Never pickle: the blobs are plain msgpack.
O(rows) per batch, no state: a re-run batch packs the same rows the same way (the processor
sorts a bucket's records by arrival, so the order of rows and records does not matter).

Key buckets themselves (:data:`BUCKET`, :func:`key_bucket`) are defined here for every query
that groups by them (the pipeline's and ``ON CONFLICT``'s).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import msgpack

from ..sinks.arrow import column_values

if TYPE_CHECKING:
    from pyspark.sql import Column

BUCKET = "_upsertmat_bucket"  # the key bucket column (LONG)
PACKED = "_upsertmat_packed"  # the packed records column (BINARY)
# Spark simple type names whose values msgpack carries exactly (as int, float, bool, str, None).
PACKABLE_TYPES = frozenset({"bigint", "int", "smallint", "tinyint", "boolean", "string", "double"})


def key_bucket(pk: Sequence[str], buckets: int) -> Column:
    """The key bucket of a row: ``pmod(xxhash64(*pk), buckets)``, in ``[0, buckets)``. The state
    of a checkpoint is kept per bucket, so this expression must never change (one definition for
    every query that groups by bucket)."""
    from pyspark.sql import functions

    return functions.pmod(functions.xxhash64(*pk), functions.lit(buckets))


def packed_schema(bucket: str) -> str:
    """The DDL schema of :func:`pack_changes`'s output: the bucket and the packed records."""
    return f"{bucket} LONG, {PACKED} BINARY"


def pack_changes(batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function: batches ``(bucket, field, field, ...)`` -> one row
    ``(bucket, msgpack [[field, field, ...], ...])`` per bucket of each batch.

    The batch is sorted by bucket in Arrow (``sort_indices``, ``run_end_encode``), so the Python
    work is one tuple per record and one ``packb`` per bucket: O(rows log rows) in C plus O(rows)
    Python, about 0.4 µs a record."""
    import pyarrow as pa  # type: ignore[import-untyped]  # only in the Python workers
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    packb = msgpack.Packer(use_bin_type=True, autoreset=True).pack
    for batch in batches:
        if batch.num_rows == 0:
            continue
        ordered = batch.take(pc.sort_indices(batch.column(0)))
        runs = pc.run_end_encode(ordered.column(0))
        columns = [column_values(ordered.column(index)) for index in range(1, ordered.num_columns)]
        records = list(zip(*columns, strict=True))
        blobs, start = [], 0
        for end in runs.run_ends.to_pylist():
            blobs.append(packb(records[start:end]))
            start = end
        yield pa.RecordBatch.from_arrays(
            [runs.values, pa.array(blobs, pa.binary())], names=[batch.schema.names[0], PACKED]
        )


def unpack_records(blobs: list[bytes]) -> list[tuple[Any, ...]]:
    """The records of packed blobs (:func:`pack_changes`), as tuples, in blob order. O(bytes)."""
    records: list[tuple[Any, ...]] = []
    for blob in blobs:
        records.extend(msgpack.unpackb(blob, use_list=False, raw=False, strict_map_key=True))
    return records


def packable(types: dict[str, str], names: list[str]) -> bool:
    """True when every column in ``names`` (``types``: name -> Spark simple type) has a type
    msgpack carries exactly (:data:`PACKABLE_TYPES`)."""
    return all(types[name] in PACKABLE_TYPES for name in names)
