"""A key check's report for people (text, ending with a one-line verdict) and as JSON data."""

from __future__ import annotations

import json
from typing import Any

from upsertmat.spec import Keys
from upsertmat.spec.misses import ColumnDiff

from .checker import Finding, Report, Violation


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _diffs(diffs: tuple[ColumnDiff, ...]) -> str:
    return "; ".join(
        f"column {d.column}: {_json(d.stored)} added, {_json(d.retracted)} retracted" for d in diffs
    )


def describe(finding: Finding, keys: Keys) -> str:
    """One finding in one line, with its line numbers."""
    change = finding.change
    head = f"line {finding.line}: {change.kind.value} {_json(list(change.row))}"
    if finding.kind is Violation.DIFFERS and keys.upsert_key:
        added = finding.other_line
        return f"{head} retracts the row added on line {added} with other values: {_diffs(finding.diffs)}"
    if finding.kind is Violation.DIFFERS:
        return (
            f"{head} matches no live row; the closest live row of its sink key (added on line "
            f"{finding.other_line}) differs in {_diffs(finding.diffs)}"
        )
    if finding.kind is Violation.RETRACT_BEFORE_ADD:
        return f"{head} arrived before its ADD, on line {finding.other_line}"
    if finding.kind is Violation.NEVER_ADDED:
        return f"{head} retracts a row no earlier or later line adds"
    return (
        f"{head} adds upsert key {_json([change.row[c] for c in keys.upsert_key])} while the row added on "
        f"line {finding.other_line} is live"
    )


def verdict(report: Report) -> str:
    """The last line: ``OK ...`` or ``FAIL: N violation(s) (...)``, usable in CI."""
    if report.ok:
        return f"check-keys: OK: {report.changes:,} change(s) in {report.lines:,} line(s), no violation"
    counts = ", ".join(f"{kind.value} {report.count(kind)}" for kind in Violation if report.count(kind))
    return f"check-keys: FAIL: {len(report.findings):,} violation(s) ({counts}) in {report.lines:,} line(s)"


def render_text(report: Report, keys: Keys, examples: int) -> str:
    """Per kind of violation: the count, what it means, the first ``examples``; then notes and
    the verdict."""
    upsert = f", declared upsert key columns {list(keys.upsert_key)}" if keys.upsert_key else ""
    lines = [f"keys: sink primary key columns {list(keys.pk)}{upsert}"]
    for kind in Violation:
        found = [finding for finding in report.findings if finding.kind is kind]
        if not found:
            continue
        lines.append(f"{kind.value}: {len(found):,} — {kind.meaning}")
        lines += [f"  {describe(finding, keys)}" for finding in found[:examples]]
        if len(found) > examples:
            lines.append(f"  ... and {len(found) - examples:,} more")
    if report.bare_updates:
        lines.append(
            f"note: {report.bare_updates:,} bare +U update(s) of a live upsert key (upsert-style input): the "
            "materializer replaces in place, and its final table is exact only for retract-style input "
            "(docs/spec.md, section 6)"
        )
    lines.append(verdict(report))
    return "\n".join(lines) + "\n"


def render_json(report: Report, keys: Keys, examples: int) -> str:
    """The report as one JSON object (counts, the first ``examples`` findings per kind, verdict)."""
    data = {
        "ok": report.ok,
        "lines": report.lines,
        "changes": report.changes,
        "bare_updates": report.bare_updates,
        "counts": {kind.value: report.count(kind) for kind in Violation},
        "examples": {
            kind.value: [
                {
                    "line": finding.line,
                    "op": finding.change.kind.value,
                    "row": list(finding.change.row),
                    "other_line": finding.other_line or None,
                    "other_row": None if finding.other_row is None else list(finding.other_row),
                    "diffs": [
                        {"column": d.column, "added": d.stored, "retracted": d.retracted}
                        for d in finding.diffs
                    ],
                    "text": describe(finding, keys),
                }
                for finding in report.findings
                if finding.kind is kind
            ][:examples]
            for kind in Violation
        },
        "verdict": verdict(report),
    }
    return json.dumps(data, ensure_ascii=False) + "\n"
