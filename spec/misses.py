"""Why a retraction matched nothing: the explanation of a rule-7 miss (docs/spec.md, rule 7).

A miss emits nothing and changes nothing; its *explanation* is a diagnostic for the people who
run the operator, not part of rules 1-11, and no implementation is required to give one. It is
defined here, once, so that every front end (the library, ``upsertmat replay``, the Spark
pipeline) explains a miss alike:

- **candidates**: the stored rows of the retraction's context key that were read (an
  implementation reads at most a bounded number of them, the newest first), ranked by fewest
  differing upsert-key columns, then fewest differing columns, then newest first; the first
  :data:`MAX_CANDIDATES` are kept, each with the columns that differ and both values.
  Columns are compared type-exactly (their canonical encodings, section 4 of docs/spec.md), so
  ``1`` and ``1.0`` differ. With a custom equalizer a listed column may be one the equalizer
  ignores.
- **cause**: ``differs`` when the key holds rows (none of which matches: the candidates show
  which columns differ); when it holds none, ``expired`` if rows of the key were removed by TTL
  expiry earlier in this process (the ADD most likely expired before its RETRACT), else
  ``never_added`` (no ADD of it has arrived on this sink key: it was lost, it is still to come,
  or a sink-key column of the ADD or the RETRACT was computed differently).

Cost: :func:`explain_miss` is O(rows x columns) to rank the rows (counts only) plus the diffs
of the :data:`MAX_CANDIDATES` closest.
"""

from __future__ import annotations

import enum
import heapq
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .changes import Change, Row, RowKind
from .encoding import JsonValue, canonical
from .keys import Keys

MAX_CANDIDATES = 3
"""How many of the closest stored rows an explanation keeps."""


class MissCause(enum.Enum):
    """Why a retraction matched nothing, as far as its own key's state tells."""

    DIFFERS = "differs"
    """The key holds rows, and none matches: see the candidates' differing columns."""
    EXPIRED = "expired"
    """The key holds no row, and rows of it expired by TTL: the ADD expired before its RETRACT."""
    NEVER_ADDED = "never_added"
    """The key holds no row and nothing of it expired: no ADD of it has arrived on this sink key
    (lost, still to come, or sent with another sink key)."""


@dataclass(frozen=True, slots=True)
class ColumnDiff:
    """One column in which a stored row and the retraction differ (a missing column reads null)."""

    column: int
    stored: JsonValue
    retracted: JsonValue


@dataclass(frozen=True, slots=True)
class Candidate:
    """A stored row of the retraction's key, and how it differs from the retraction.

    ``from_last``: 0 is the key's last stored row (the row the sink shows), 1 the one before it,
    and so on. ``key_diffs``: how many of ``diffs`` are upsert-key columns.
    """

    row: Row
    from_last: int
    diffs: tuple[ColumnDiff, ...]
    key_diffs: int


@dataclass(frozen=True, slots=True)
class MissExplanation:
    """The explanation of one miss.

    ``rows_read``: stored rows of the key examined (visible ones; at most the implementation's
    bound); ``truncated``: the key holds older rows that were not read. ``expired``: how many
    expiry removals of the key's rows this process has seen (0 with TTL off).
    """

    change: Change
    context: bytes
    cause: MissCause
    candidates: tuple[Candidate, ...]
    rows_read: int
    truncated: bool
    expired: int

    @property
    def sink_key(self) -> Any:
        """The context key as JSON values (the sink primary key's values)."""
        return json.loads(self.context)

    def describe(self) -> str:
        """One line for people: the retraction, then :meth:`reason`."""
        row = _json(list(self.change.row))
        return f"{self.change.kind.value} {row} matched no stored row: {self.reason()}"

    def reason(self) -> str:
        """Why, in words: the key's state, or the closest stored row and the columns that differ."""
        key = _json(self.sink_key)
        if self.cause is MissCause.NEVER_ADDED:
            return (
                f"sink key {key} holds no row and none of it expired (no ADD of it has arrived on this "
                "key: lost, still to come, or sent with another sink key)"
            )
        if self.cause is MissCause.EXPIRED:
            return (
                f"sink key {key} holds no row; its rows expired by TTL (the ADD expired before its RETRACT)"
            )
        best = self.candidates[0]
        where = (
            "its last stored row" if best.from_last == 0 else f"stored row {best.from_last + 1} from the end"
        )
        shown = "; ".join(
            f"column {d.column}: {_json(d.stored)} stored, {_json(d.retracted)} retracted" for d in best.diffs
        )
        read = f"{self.rows_read} row{'' if self.rows_read == 1 else 's'} read"
        more = ", more not read" if self.truncated else ""
        return f"closest in sink key {key} is {where} ({read}{more}), differing in {shown}"

    def to_json(self) -> dict[str, Any]:
        """The explanation as JSON-ready data (the record ``replay --misses`` writes)."""
        return {
            "op": self.change.kind.value,
            "row": list(self.change.row),
            "key": self.sink_key,
            "cause": self.cause.value,
            "candidates": [
                {
                    "row": list(candidate.row),
                    "from_last": candidate.from_last,
                    "key_diffs": candidate.key_diffs,
                    "diffs": [
                        {"column": d.column, "stored": d.stored, "retracted": d.retracted}
                        for d in candidate.diffs
                    ],
                }
                for candidate in self.candidates
            ],
            "rows_read": self.rows_read,
            "truncated": self.truncated,
            "expired": self.expired,
        }


def from_json(data: dict[str, Any]) -> MissExplanation:
    """The explanation :meth:`MissExplanation.to_json` wrote (e.g. read back from a side table).
    KeyError or ValueError for data of another shape."""
    change = Change(RowKind.parse(data["op"]), tuple(data["row"]))
    candidates = tuple(
        Candidate(
            tuple(item["row"]),
            item["from_last"],
            tuple(ColumnDiff(d["column"], d["stored"], d["retracted"]) for d in item["diffs"]),
            item.get("key_diffs", 0),
        )
        for item in data["candidates"]
    )
    return MissExplanation(
        change,
        canonical(data["key"]),
        MissCause(data["cause"]),
        candidates,
        data["rows_read"],
        data["truncated"],
        data["expired"],
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


_PLAIN = frozenset((str, int, bool, type(None)))


def same_value(a: JsonValue, b: JsonValue) -> bool:
    """Type-exact equality of two JSON values: equal canonical encodings (section 4 of
    docs/spec.md). Strings, integers, booleans and null of one type compare directly (``==`` is
    exact for them); floats by their shortest repr (``0.0`` and ``-0.0`` differ); anything else
    (``1`` vs ``1.0``, arrays, objects) by its canonical encoding."""
    kind = type(a)
    if kind is type(b):
        if kind in _PLAIN:
            return a == b
        if kind is float:
            return repr(a) == repr(b)
    return canonical([a]) == canonical([b])


def _equal(old: JsonValue, new: JsonValue) -> bool:
    """:func:`same_value`, with the common cases (one plain type, floats) inline first."""
    kind = type(old)
    if kind is type(new):
        if kind in _PLAIN:
            return old == new
        if kind is float:
            return old == new and repr(old) == repr(new)
    return same_value(old, new)


def column_diffs(stored: Row, retracted: Row) -> tuple[ColumnDiff, ...]:
    """The columns in which two rows differ, type-exactly, in column order (a column one row
    lacks reads null there). O(size of the rows)."""
    diffs = [
        ColumnDiff(column, old, new)
        for column, (old, new) in enumerate(zip(stored, retracted, strict=False))
        if not _equal(old, new)
    ]
    shorter = min(len(stored), len(retracted))
    for column in range(shorter, max(len(stored), len(retracted))):
        old = stored[column] if column < len(stored) else None
        new = retracted[column] if column < len(retracted) else None
        diffs.append(ColumnDiff(column, old, new))
    return tuple(diffs)


def _differing(stored: Row, retracted: Row, upsert: frozenset[int]) -> tuple[int, int]:
    """(differing upsert-key columns, differing columns) of two rows: :func:`column_diffs`'s
    count, without building the diffs (the ranking needs only the counts)."""
    total = key = 0
    equal = _equal
    for column, (old, new) in enumerate(zip(stored, retracted, strict=False)):
        if not equal(old, new):
            total += 1
            key += column in upsert
    for column in range(min(len(stored), len(retracted)), max(len(stored), len(retracted))):
        total += 1
        key += column in upsert
    return key, total


def explain_miss(
    keys: Keys,
    change: Change,
    context: bytes,
    rows: Sequence[Row],
    *,
    truncated: bool = False,
    expired: int = 0,
) -> MissExplanation:
    """The explanation of ``change``, a retraction that matched none of ``rows``.

    ``rows``: the visible stored rows of ``context`` that were read, oldest first (with
    ``truncated``, the newest ones of a longer history); ``expired``: expiry removals of the
    key's rows seen so far. O(len(rows) x row size), the differing columns listed for the
    :data:`MAX_CANDIDATES` closest only.
    """
    if not rows:
        cause = MissCause.EXPIRED if expired else MissCause.NEVER_ADDED
        return MissExplanation(change, context, cause, (), 0, truncated, expired)
    upsert = frozenset(keys.upsert_key)
    retracted = change.row
    last = len(rows) - 1
    ranked = heapq.nsmallest(
        MAX_CANDIDATES,
        ((*_differing(row, retracted, upsert), last - position) for position, row in enumerate(rows)),
    )
    candidates = tuple(
        Candidate(
            rows[last - from_last], from_last, column_diffs(rows[last - from_last], retracted), key_diffs
        )
        for key_diffs, _, from_last in ranked
    )
    return MissExplanation(change, context, MissCause.DIFFERS, candidates, len(rows), truncated, expired)
