"""``sinks.arrow.column_values``: an Arrow column's values as Python objects, exactly as
``to_pylist`` gives them (value, type, -0.0 and NaN, nulls) for every type, through NumPy where
that is exact. Checked against ``to_pylist`` itself on generated columns, plain and chunked."""

from __future__ import annotations

import datetime
import decimal
import math
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pytest
from hypothesis import given
from hypothesis import strategies as st

from upsertmat.sinks.arrow import column_values

pytestmark = pytest.mark.spark  # pyarrow comes with the spark extra

INTEGERS = {
    pa.int8(): 7,
    pa.int16(): 15,
    pa.int32(): 31,
    pa.int64(): 63,
}
UNSIGNED = {pa.uint8(): 8, pa.uint16(): 16, pa.uint32(): 32, pa.uint64(): 64}


def values_of(kind: Any) -> st.SearchStrategy[Any]:
    """Values of one Arrow type (without null)."""
    if kind in INTEGERS:
        bits = INTEGERS[kind]
        return st.integers(-(2**bits), 2**bits - 1)
    if kind in UNSIGNED:
        return st.integers(0, 2 ** UNSIGNED[kind] - 1)
    if kind == pa.float64():
        return st.floats(allow_nan=True, allow_infinity=True)
    if kind == pa.float32():
        return st.floats(width=32, allow_nan=True, allow_infinity=True)
    if kind == pa.bool_():
        return st.booleans()
    if kind in (pa.string(), pa.large_string()):
        return st.text()
    if kind in (pa.binary(), pa.large_binary()):
        return st.binary()
    if kind == pa.timestamp("us"):
        return st.datetimes(datetime.datetime(1900, 1, 1), datetime.datetime(2200, 1, 1))
    if kind == pa.date32():
        return st.dates()
    assert kind == pa.decimal128(10, 2)
    return st.decimals(min_value=-(10**7), max_value=10**7, places=2, allow_nan=False)


KINDS = [
    *INTEGERS,
    *UNSIGNED,
    pa.float32(),
    pa.float64(),
    pa.bool_(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.timestamp("us"),
    pa.date32(),
    pa.decimal128(10, 2),
]


def exact(values: list[Any]) -> list[tuple[type, str]]:
    """What must agree: each value's type and repr (so -0.0 differs from 0.0, NaN equals NaN)."""
    return [(type(value), repr(value)) for value in values]


@st.composite
def columns(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(KINDS))
    value = values_of(kind)
    if draw(st.booleans()):
        value = st.none() | value
    chunks = draw(st.lists(st.lists(value, max_size=12), max_size=4))
    if draw(st.booleans()) and len(chunks) == 1:
        return pa.array(chunks[0], kind)
    return pa.chunked_array([pa.array(chunk, kind) for chunk in chunks], kind)


@given(columns())
def test_the_values_and_types_to_pylist_gives(column: Any) -> None:
    assert exact(column_values(column)) == exact(column.to_pylist())


@pytest.mark.parametrize(
    ("values", "kind"),
    [
        ([1, None, 3], pa.int64()),  # NumPy would give floats and NaN: to_pylist instead
        ([-0.0, math.nan, None], pa.float64()),
        ([True, None, False], pa.bool_()),
        (["é", None, ""], pa.string()),
        ([b"\xff", None], pa.binary()),
        ([2**63 - 1, -(2**63)], pa.int64()),
        ([2**64 - 1], pa.uint64()),
        ([decimal.Decimal("1.10"), None], pa.decimal128(10, 2)),
        ([], pa.string()),
    ],
)
def test_edges(values: list[Any], kind: Any) -> None:
    column = pa.array(values, kind)
    assert exact(column_values(column)) == exact(column.to_pylist()) == exact(values)
    sliced = pa.chunked_array([column.slice(1), column.slice(0, 1)], kind)
    assert exact(column_values(sliced)) == exact(sliced.to_pylist())
