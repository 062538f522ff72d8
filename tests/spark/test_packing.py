"""Packing a batch's changes per key bucket (the ``mapInArrow`` step before the shuffle)."""

from __future__ import annotations

import math

import pyarrow as pa  # type: ignore[import-untyped]
import pytest

from upsertmat.spark.packing import PACKED, pack_changes, packable, packed_schema, unpack_records

pytestmark = pytest.mark.spark


def test_one_row_per_bucket_holding_its_records_in_input_order_with_exact_types() -> None:
    records = [
        (3, 0, "+I", 1, 1.0, True, "a"),
        (1, 1, "+I", 2, -0.0, False, "é"),
        (3, 2, "-U", 1, math.nan, None, None),
        (3, 3, "+U", 2**62, 2.5, True, ""),
    ]
    names = ["bucket", "seq", "op", "id", "amount", "flag", "payload"]
    batch = pa.RecordBatch.from_pylist([dict(zip(names, record, strict=True)) for record in records])
    out = list(pack_changes(iter([batch, batch.slice(0, 0)])))
    assert len(out) == 1  # the empty batch yields nothing
    assert out[0].schema.names == ["bucket", PACKED]
    packed = dict(zip(out[0].column(0).to_pylist(), out[0].column(1).to_pylist(), strict=True))
    assert sorted(packed) == [1, 3]
    three = unpack_records([packed[3]])
    assert [record[0] for record in three] == [0, 2, 3]
    assert three[0] == (0, "+I", 1, 1.0, True, "a") and type(three[0][3]) is float
    assert math.isnan(three[1][3]) and three[1][4:] == (None, None)
    assert three[2][2] == 2**62
    (one,) = unpack_records([packed[1]])
    assert one[1:3] == ("+I", 2) and math.copysign(1.0, one[3]) == -1.0 and one[5] == "é"
    # Several blobs of a bucket (one per source batch) concatenate in blob order.
    both = unpack_records([packed[1], packed[3]])
    assert [record[0] for record in both] == [1, 0, 2, 3] and both[3] == three[2]


def test_only_types_msgpack_carries_exactly_are_packable() -> None:
    types = {
        "a": "bigint",
        "b": "double",
        "c": "string",
        "d": "boolean",
        "e": "timestamp",
        "f": "decimal(10,2)",
    }
    assert packable(types, ["a", "b", "c", "d"])
    assert not packable(types, ["a", "e"])
    assert not packable(types, ["f"])
    assert packed_schema("k") == f"k LONG, {PACKED} BINARY"
