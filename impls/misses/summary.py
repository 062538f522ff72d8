r"""A run's misses in a few lines: counts per cause, and per column how often it differed and why.

:class:`MissSummary` folds :class:`~upsertmat.spec.misses.MissExplanation`\\ s in one at a time
(O(row size) each; memory bounded by :data:`DISTINCT_CAP` values per column). Only the closest
candidate of each miss counts for the columns: it is the row the retraction was most likely
meant for. Each column that differed gets a hint from what its differences have in common:

- every difference is the same number in another JSON type (``1`` / ``1.0``): a cast;
- every difference is between floats equal to 9 significant digits: a float computed twice;
- its values never repeat (no value seen twice on either side): a non-deterministic column,
  and a time taken when the change is computed if the retraction's value is always the later;
- otherwise its values repeat: a looked-up value that changed between the ADD and its RETRACT.

The hints are guesses from the values, worded as questions; the counts are exact.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...spec.encoding import JsonValue, canonical
from ...spec.misses import ColumnDiff, MissCause, MissExplanation

DISTINCT_CAP = 4096
"""Values per column and side remembered to tell whether values repeat."""

SHOWN_COLUMNS = 10
"""Columns :meth:`MissSummary.lines` describes (the most frequently differing first)."""


def _number(value: JsonValue) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _instant(value: JsonValue) -> float | None:
    """A number, or an ISO 8601 date-time string as seconds; None for anything else."""
    if _number(value):
        return float(value)  # type: ignore[arg-type]
    if isinstance(value, str) and 10 <= len(value) <= 40 and value[:4].isdigit():
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return None


@dataclass
class _Distinct:
    """Whether any value was seen twice, over the first :data:`DISTINCT_CAP` distinct values."""

    seen: set[bytes] = field(default_factory=set)
    repeated: bool = False

    def add(self, value: JsonValue) -> None:
        encoded = canonical([value])
        if encoded in self.seen:
            self.repeated = True
        elif len(self.seen) < DISTINCT_CAP:
            self.seen.add(encoded)


@dataclass
class ColumnStats:
    """How one column differed over the misses (closest candidates only)."""

    column: int
    differed: int = 0
    type_only: int = 0
    float_close: int = 0
    later: int = 0
    example: ColumnDiff | None = None
    _stored: _Distinct = field(default_factory=_Distinct, repr=False)
    _retracted: _Distinct = field(default_factory=_Distinct, repr=False)

    def add(self, diff: ColumnDiff) -> None:
        """Count one difference. O(value size)."""
        stored, retracted = diff.stored, diff.retracted
        self.differed += 1
        if self.example is None:
            self.example = diff
        if _number(stored) and _number(retracted):
            if type(stored) is not type(retracted) and stored == retracted:
                self.type_only += 1
            elif (
                isinstance(stored, float)
                and isinstance(retracted, float)
                and math.isclose(stored, retracted, rel_tol=1e-9, abs_tol=0.0)
            ):
                self.float_close += 1
        old, new = _instant(stored), _instant(retracted)
        if old is not None and new is not None and new > old:
            self.later += 1
        self._stored.add(stored)
        self._retracted.add(retracted)

    @property
    def values_repeat(self) -> bool:
        """Whether a stored or a retracted value of this column was seen in two misses."""
        return self._stored.repeated or self._retracted.repeated

    def hint(self) -> str:
        """What the differences have in common, as a question (see the module docstring)."""
        n = self.differed
        if self.type_only == n:
            return "the same number in another JSON type: is the column cast differently on the two paths?"
        if self.float_close == n:
            return (
                "floats equal to 9 significant digits: a floating-point value computed twice "
                "(an aggregate?); round it, or keep it out of the compared columns"
            )
        if n < 2:
            return "one miss: too few to tell a pattern"
        if not self.values_repeat:
            if self.later == n:
                return (
                    "its values never repeat and the retraction's is always the later: a time taken "
                    "when the change is computed (NOW(), PROCTIME(), CURRENT_TIMESTAMP)?"
                )
            return (
                "its values never repeat: a non-deterministic column (UUID(), RAND(), NOW(), "
                "a metadata column)?"
            )
        return (
            "its values repeat: a looked-up value that changed between the ADD and its RETRACT "
            "(a lookup join on a changing dimension)?"
        )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass
class MissSummary:
    """Counters over explanations: per cause, and per column of the closest candidates."""

    misses: int = 0
    causes: dict[MissCause, int] = field(default_factory=lambda: dict.fromkeys(MissCause, 0))
    truncated: int = 0
    columns: dict[int, ColumnStats] = field(default_factory=dict)

    def add(self, explanation: MissExplanation) -> None:
        """Fold one explanation in. O(size of its closest candidate)."""
        self.misses += 1
        self.causes[explanation.cause] += 1
        self.truncated += explanation.truncated
        if explanation.candidates:
            for diff in explanation.candidates[0].diffs:
                stats = self.columns.get(diff.column)
                if stats is None:
                    stats = self.columns[diff.column] = ColumnStats(diff.column)
                stats.add(diff)

    def extend(self, explanations: Iterable[MissExplanation]) -> None:
        """:meth:`add` each."""
        for explanation in explanations:
            self.add(explanation)

    def column_name(self, column: int, names: Sequence[str] | None) -> str:
        """``column 3`` or ``column 3 (ts)``."""
        if names is not None and 0 <= column < len(names):
            return f"column {column} ({names[column]})"
        return f"column {column}"

    def lines(self, names: Sequence[str] | None = None) -> list[str]:
        """The summary for people: one line of counts, one per differing column (most first)."""
        if not self.misses:
            return []
        compared = self.causes[MissCause.DIFFERS]
        never, expired = self.causes[MissCause.NEVER_ADDED], self.causes[MissCause.EXPIRED]
        lines = [f"{self.misses:,} retraction(s) matched no stored row (rule 7):"]
        if compared:
            lines.append(f"  {compared:,} differed from every stored row of their sink key (columns below)")
        if expired:
            lines.append(f"  {expired:,} found their sink key empty because its rows expired by TTL")
        if never:
            lines.append(
                f"  {never:,} found their sink key empty, nothing of it expired: no ADD had arrived "
                "(lost, still to come, or sent with another sink key)"
            )
        ranked = sorted(self.columns.values(), key=lambda stats: (-stats.differed, stats.column))
        for stats in ranked[:SHOWN_COLUMNS]:
            example = stats.example
            shown = (
                f" (e.g. {_json(example.stored)} stored, {_json(example.retracted)} retracted)"
                if example is not None
                else ""
            )
            lines.append(
                f"  {self.column_name(stats.column, names)} differed in {stats.differed:,} of those "
                f"{compared:,}: {stats.hint()}{shown}"
            )
        if len(ranked) > SHOWN_COLUMNS:
            lines.append(f"  ... and {len(ranked) - SHOWN_COLUMNS} more column(s)")
        return lines

    def to_json(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """The counters as JSON-ready data."""
        return {
            "misses": self.misses,
            "causes": {cause.value: count for cause, count in self.causes.items()},
            "truncated": self.truncated,
            "columns": [
                {
                    "column": stats.column,
                    "name": names[stats.column] if names is not None and stats.column < len(names) else None,
                    "differed": stats.differed,
                    "values_repeat": stats.values_repeat,
                    "hint": stats.hint(),
                }
                for stats in sorted(self.columns.values(), key=lambda s: (-s.differed, s.column))
            ],
        }
