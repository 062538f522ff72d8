"""What reading a sink's committed results gives: a table snapshot pinned to one batch, and the
committed table changes. Every sink kind's reader (:meth:`SinkKind.snapshot
<upsertmat.sinks.kind.SinkKind.snapshot>`, :meth:`~upsertmat.sinks.kind.SinkKind.changes`)
returns these, so the result modes and the gateway read every sink alike.

Positions number a table's committed changes along its changelog. The SQL sinks count 1, 2, ...
(dense); the lakehouse sinks use :func:`position` (``batch_id << 32 | index + 1``: increasing and
stable, not dense), since their changes are derived per batch from the table's own history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..spec.changes import Row
from .base import SinkError

T = TypeVar("T")


@dataclass(frozen=True)
class TableSnapshot:
    """The table after batch ``batch_id`` (None: no batch committed yet): ``columns``, ``rows``
    ordered by primary key (at most the limit asked for), ``total`` rows in the table, and
    ``changes_pos``: the changelog position at that batch (0 without a changelog)."""

    batch_id: int | None
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    total: int
    changes_pos: int


NO_TABLE = TableSnapshot(None, (), (), 0, 0)
"""The snapshot of a sink that holds no table yet (nothing committed)."""


@dataclass(frozen=True)
class TableChange:
    """One committed table change: its position, batch id, ``op`` (``+I -U +U -D``) and row."""

    pos: int
    batch_id: int
    op: str
    row: Row


def same_row(left: Row, right: Row) -> bool:
    """True when a stored row did not change: equal value for value, NaN equal to NaN (a row
    holding NaN read twice is the same row; ``nan != nan`` would record a change). O(columns)."""
    if left == right:
        return True
    if len(left) != len(right):
        return False
    return all(a == b or (a != a and b != b) for a, b in zip(left, right, strict=True))


def position(batch_id: int, index: int) -> int:
    """The changelog position of the ``index``-th (0-based) change of batch ``batch_id`` in a sink
    whose changes are derived per batch: increasing along the changelog, stable, not dense."""
    return (batch_id << 32) + index + 1


def guarded(what: str, url: str, read: Callable[[], T]) -> T:
    """``read()``, with a table library's own error classes reported as one SinkError: "cannot
    read WHAT of URL: ERROR" (``what``: "the sink table orders", "the changes of orders")."""
    try:
        return read()
    except SinkError:
        raise
    except Exception as error:  # the table libraries raise their own classes
        raise SinkError(f"cannot read {what} of {url}: {type(error).__name__}: {error}") from None
