"""The demo's side-by-side view of the expected table and the two sink tables. O(keys)."""

from __future__ import annotations

from .tables import TableView, disagreements

MISSING = "(missing)"


def _cell(row: tuple[object, ...] | None) -> str:
    return MISSING if row is None else f"level {row[1]} {row[2]}"


def side_by_side(expected: TableView, raw: TableView, materialized: TableView, width: int = 22) -> str:
    """One line per key: expected row, the raw sink's, the materialized sink's; wrong cells marked ``!``."""
    wrong_raw = set(disagreements(raw, expected))
    wrong_mat = set(disagreements(materialized, expected))
    header = (
        f"{'id':>4}  {'expected (logical order)':<{width}}  {'without materializer':<{width + 2}}  "
        f"{'with materializer':<{width + 2}}"
    )
    lines = [header, "-" * len(header)]
    for key in sorted(expected.keys() | raw.keys() | materialized.keys()):
        raw_cell = _cell(raw.get(key)) + (" !" if key in wrong_raw else "  ")
        mat_cell = _cell(materialized.get(key)) + (" !" if key in wrong_mat else "  ")
        lines.append(
            f"{key:>4}  {_cell(expected.get(key)):<{width}}  {raw_cell:<{width + 2}}  {mat_cell:<{width + 2}}"
        )
    return "\n".join(lines)


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
