"""Change, row kind and row types of a changelog, with exact (type-aware) equality.

Rows are tuples of JSON values. Python says ``1 == 1.0 == True``; a changelog does not: the
comparisons in this module go through :func:`upsertmat.spec.encoding.canonical`, so ``1``,
``1.0`` and ``true`` are three different values everywhere in the project.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TypeAlias

from .encoding import JsonValue, canonical

Row: TypeAlias = tuple[JsonValue, ...]


class RowKind(enum.Enum):
    """The four kinds of change. ``value`` is the short string used in JSON Lines."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    @property
    def is_add(self) -> bool:
        """Rule 1: ``+I`` and ``+U`` add a row; ``-U`` and ``-D`` retract one."""
        return self in (RowKind.INSERT, RowKind.UPDATE_AFTER)

    @classmethod
    def parse(cls, text: str) -> RowKind:
        """The kind written as ``text`` (``"+I"``...). Raises ValueError naming the bad op."""
        for kind in cls:
            if kind.value == text:
                return kind
        raise ValueError(f"unknown op {text!r} (expected one of +I, -U, +U, -D)")


@dataclass(frozen=True, eq=False, slots=True)
class Change:
    """One changelog entry: a kind, a row and an optional event timestamp (ms).

    Equality and hashing are exact: kinds equal, ``ts`` equal and rows equal under the
    canonical encoding (so ``Change(INSERT, (1,)) != Change(INSERT, (True,))``).
    """

    kind: RowKind
    row: Row
    ts: int | None = None

    def exact(self) -> tuple[str, bytes, int | None]:
        """The tuple that equality and hashing compare."""
        return (self.kind.value, canonical(self.row), self.ts)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Change):
            return NotImplemented
        return self.exact() == other.exact()

    def __hash__(self) -> int:
        return hash(self.exact())

    def __repr__(self) -> str:
        suffix = "" if self.ts is None else f", ts={self.ts}"
        return f"{self.kind.value}{list(self.row)!r}{suffix}"


def insert(*row: JsonValue, ts: int | None = None) -> Change:
    """Shorthand for ``Change(RowKind.INSERT, row, ts)``."""
    return Change(RowKind.INSERT, row, ts)


def update_before(*row: JsonValue, ts: int | None = None) -> Change:
    """Shorthand for ``Change(RowKind.UPDATE_BEFORE, row, ts)``."""
    return Change(RowKind.UPDATE_BEFORE, row, ts)


def update_after(*row: JsonValue, ts: int | None = None) -> Change:
    """Shorthand for ``Change(RowKind.UPDATE_AFTER, row, ts)``."""
    return Change(RowKind.UPDATE_AFTER, row, ts)


def delete(*row: JsonValue, ts: int | None = None) -> Change:
    """Shorthand for ``Change(RowKind.DELETE, row, ts)``."""
    return Change(RowKind.DELETE, row, ts)
