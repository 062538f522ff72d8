"""What breaks the guarantee the materializer relies on, found in a changelog (``check-keys``).

The guarantee (docs/spec.md, section 1): for a given upsert key — or the whole row when there is
none — an ADD arrives before its own RETRACT, and both carry the same row. In an arrival-ordered
changelog the changes of one *match key* (the upsert-key value, or the whole row) come through
one channel, so their order in the file is their logical order, and each can be checked there:

- ``differs``: a RETRACT of a live upsert key whose other columns differ from the row its ADD
  carried (with an upsert key the materializer still matches it, by key, but a sink-key column
  that differs sends it to another key: a miss); without an upsert key, a RETRACT that matches
  no live row while rows of its sink key are live — the closest one is shown;
- ``retract-before-add``: a RETRACT that finds nothing live and whose ADD arrives later;
- ``never-added``: a RETRACT that finds nothing live and no later ADD (the stream began after
  the ADD, or the ADD was lost);
- ``not-unique``: with a declared upsert key, an ``+I`` of a key that is live already (two live
  rows for one key). A ``+U`` of a live key is an upsert-style update (the materializer
  replaces in place) and is counted, not flagged.

One pass, O(size of the line) per change; memory O(live rows) (the logical table) plus the
retractions still waiting for their ADD.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from upsertmat.spec import Change, Keys, Row, canonical, project
from upsertmat.spec.misses import ColumnDiff, column_diffs


class Violation(enum.Enum):
    """A kind of finding, with what it means."""

    DIFFERS = "differs"
    RETRACT_BEFORE_ADD = "retract-before-add"
    NEVER_ADDED = "never-added"
    NOT_UNIQUE = "not-unique"

    @property
    def meaning(self) -> str:
        """One line for people."""
        return {
            Violation.DIFFERS: "a RETRACT carries other values than the row its ADD stored",
            Violation.RETRACT_BEFORE_ADD: "a RETRACT arrived before its ADD",
            Violation.NEVER_ADDED: "a RETRACT of a row never added",
            Violation.NOT_UNIQUE: "the declared upsert key has two live rows",
        }[self]


@dataclass(frozen=True)
class Finding:
    """One violation: the line that shows it, the line it pairs with (0: none) and details."""

    kind: Violation
    line: int
    change: Change
    other_line: int = 0
    other_row: Row | None = None
    diffs: tuple[ColumnDiff, ...] = ()


@dataclass
class _Pending:
    """A retraction that found nothing live: it waits for a later ADD of its match key."""

    line: int
    change: Change
    closest: tuple[int, Row] | None  # without an upsert key: a live row of the same sink key


@dataclass
class Report:
    """What one pass found: every finding (in line order), and counts."""

    lines: int = 0
    changes: int = 0
    bare_updates: int = 0
    findings: list[Finding] = field(default_factory=list)

    def count(self, kind: Violation) -> int:
        """How many findings of ``kind``."""
        return sum(finding.kind is kind for finding in self.findings)

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.findings


class KeyChecker:
    """Feed a changelog's changes in arrival order (:meth:`feed`), then :meth:`finish`.

    ``keys``: the sink primary key and, optionally, the declared upsert key.
    """

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.report = Report()
        self._live: dict[bytes, list[tuple[int, Row]]] = {}  # match key -> live rows (line, row)
        self._live_by_sink: dict[bytes, dict[bytes, int]] = {}  # sink key -> match key -> live count
        self._pending: dict[bytes, list[_Pending]] = {}

    def _match(self, row: Row) -> bytes:
        columns = self.keys.upsert_key
        return canonical(project(row, columns) if columns else row)

    def _add_live(self, match: bytes, context: bytes, line: int, row: Row) -> None:
        self._live.setdefault(match, []).append((line, row))
        counts = self._live_by_sink.setdefault(context, {})
        counts[match] = counts.get(match, 0) + 1

    def _remove_live(self, match: bytes, context: bytes) -> tuple[int, Row]:
        rows = self._live[match]
        first = rows.pop(0)
        if not rows:
            del self._live[match]
        counts = self._live_by_sink[context]
        counts[match] -= 1
        if not counts[match]:
            del counts[match]
            if not counts:
                del self._live_by_sink[context]
        return first

    def _closest(self, context: bytes, row: Row) -> tuple[int, Row] | None:
        """The live row of sink key ``context`` differing from ``row`` in the fewest columns."""
        best: tuple[int, int, Row] | None = None
        for match in self._live_by_sink.get(context, {}):
            for line, live in self._live[match]:
                score = len(column_diffs(live, row))
                if best is None or score < best[0]:
                    best = (score, line, live)
        return None if best is None else (best[1], best[2])

    def feed(self, line: int, change: Change) -> None:
        """Check one change (``line``: its line number, from 1). O(row size), plus O(live rows of
        its sink key) for a retraction that matches nothing without an upsert key."""
        report = self.report
        report.changes += 1
        row = change.row
        match = self._match(row)
        context = self.keys.context_key(row)
        if change.kind.is_add:
            self._add(line, change, match, context)
            return
        live = self._live.get(match)
        if live:
            added_line, added = live[0]
            diffs = column_diffs(added, row)
            if diffs:  # only possible with an upsert key: without one the rows are equal
                report.findings.append(Finding(Violation.DIFFERS, line, change, added_line, added, diffs))
            self._remove_live(match, self.keys.context_key(added))
            return
        closest = None if self.keys.upsert_key else self._closest(context, row)
        self._pending.setdefault(match, []).append(_Pending(line, change, closest))

    def _add(self, line: int, change: Change, match: bytes, context: bytes) -> None:
        waiting = self._pending.get(match)
        if waiting:  # the ADD of a retraction that came first
            early = waiting.pop(0)
            if not waiting:
                del self._pending[match]
            self.report.findings.append(
                Finding(Violation.RETRACT_BEFORE_ADD, early.line, early.change, line, change.row)
            )
        live = self._live.get(match)
        if live and self.keys.upsert_key:
            if change.kind.value == "+U":  # an upsert-style update: replaces in place
                self.report.bare_updates += 1
                self._remove_live(match, self.keys.context_key(live[0][1]))
            else:
                first_line, first = live[0]
                self.report.findings.append(Finding(Violation.NOT_UNIQUE, line, change, first_line, first))
        self._add_live(match, context, line, change.row)

    def finish(self, lines: int) -> Report:
        """End of the input (``lines`` read): the retractions still waiting are classified,
        and the findings sorted by line. Returns the report."""
        report = self.report
        report.lines = lines
        for waiting in self._pending.values():
            for early in waiting:
                if early.closest is not None:
                    other_line, other = early.closest
                    diffs = column_diffs(other, early.change.row)
                    report.findings.append(
                        Finding(Violation.DIFFERS, early.line, early.change, other_line, other, diffs)
                    )
                else:
                    report.findings.append(Finding(Violation.NEVER_ADDED, early.line, early.change))
        self._pending.clear()
        report.findings.sort(key=lambda finding: finding.line)
        return report
