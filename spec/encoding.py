"""Canonical, type-aware encoding of JSON values.

The encoding is compact JSON with sorted object keys. JSON already tells ``1``, ``1.0``,
``true`` and ``"1"`` apart, and Python's float repr is the shortest round-tripping one, so
two values encode alike exactly when they are the same JSON value of the same type. (Note
``0.0`` and ``-0.0`` encode differently; NaN and infinities are refused, JSON has neither.)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TypeAlias

JsonValue: TypeAlias = bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"] | None


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def canonical(values: Sequence[JsonValue]) -> bytes:
    """The canonical encoding of a sequence of values (a row or a projection of one).

    O(size of the values). Raises ValueError for values JSON cannot carry (NaN, objects).
    """
    return _ENCODER.encode(list(values)).encode("utf-8")


def project(row: Sequence[JsonValue], columns: Sequence[int]) -> tuple[JsonValue, ...]:
    """The values of ``row`` at ``columns``, in that order.

    Raises IndexError naming the first column the row does not have.
    """
    for column in columns:
        if not -len(row) <= column < len(row):
            raise IndexError(f"row of {len(row)} columns has no column {column}")
    return tuple(row[column] for column in columns)
