"""The demo's side-by-side view of the expected table and the two sink tables. O(keys)."""

from __future__ import annotations

from .tables import TableView, disagreements

MISSING = "(missing)"
HEADERS = ("id", "expected (logical order)", "without materializer", "with materializer")
WRONG, RIGHT = " !", "  "  # the mark after a cell that disagrees with the expected table


def _cell(row: tuple[object, ...] | None) -> str:
    return MISSING if row is None else f"level {row[1]} {row[2]}"


def side_by_side(expected: TableView, raw: TableView, materialized: TableView) -> str:
    """One line per key: expected row, the raw sink's, the materialized sink's; wrong cells marked ``!``.

    Every column is as wide as its widest cell or header, so each header starts exactly where
    its column's values start. Keys absent from all three tables (users deleted in the
    changelog) have no line: :func:`absent_keys` names them.
    """
    wrong_raw = set(disagreements(raw, expected))
    wrong_mat = set(disagreements(materialized, expected))
    body: list[tuple[str, str, str, str]] = []
    for key in sorted(expected.keys() | raw.keys() | materialized.keys()):
        body.append(
            (
                str(key),
                _cell(expected.get(key)),
                _cell(raw.get(key)) + (WRONG if key in wrong_raw else RIGHT),
                _cell(materialized.get(key)) + (WRONG if key in wrong_mat else RIGHT),
            )
        )
    widths = [max(len(cells[index]) for cells in [HEADERS, *body]) for index in range(len(HEADERS))]

    def line(cells: tuple[str, ...]) -> str:
        first = cells[0].rjust(widths[0])
        rest = [cell.ljust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    header = line(HEADERS)
    return "\n".join([header, "-" * len(header), *(line(cells) for cells in body)])


def absent_keys(keys: range, expected: TableView, raw: TableView, materialized: TableView) -> list[int]:
    """The keys of ``keys`` in none of the three tables (deleted in the logical changelog)."""
    shown = expected.keys() | raw.keys() | materialized.keys()
    return [key for key in keys if key not in shown]


def row_count_note(users: int, expected: TableView, absent: list[int]) -> str:
    """Why the table has fewer rows than users: the ids the changelog deleted (or '')."""
    if not absent:
        return ""
    ids = ", ".join(str(key) for key in absent)
    noun = "user" if len(absent) == 1 else "users"
    return (
        f"{len(expected)} of {users} users are in the expected table: {len(absent)} {noun} left "
        f"(-D) and did not come back (id {ids}), so no table has a row for them"
    )


def summary(expected: TableView, raw: TableView, materialized: TableView) -> str:
    """The disagreement counts, and how many rows the blind sink wrongly deleted."""
    wrong_raw = disagreements(raw, expected)
    deleted = [key for key in wrong_raw if key in expected and key not in raw]
    wrong_mat = disagreements(materialized, expected)
    return (
        f"disagreements with the expected table ({len(expected)} rows):\n"
        f"  without materializer: {len(wrong_raw)} ({len(deleted)} rows wrongly deleted, "
        f"{len(wrong_raw) - len(deleted)} wrong or extra)\n"
        f"  with materializer:    {len(wrong_mat)}"
    )
