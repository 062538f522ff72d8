"""The demo's console table: headers aligned with their values, absent ids explained."""

from __future__ import annotations

from upsertmat.demo.report import HEADERS, absent_keys, row_count_note, side_by_side
from upsertmat.demo.tables import expected_table
from upsertmat.demo.workload import DemoShape, generate


def column_starts(line: str, cells: list[str]) -> list[int]:
    """Where each of ``cells`` starts in ``line`` (searched left to right)."""
    starts, position = [], 0
    for cell in cells:
        position = line.index(cell, position)
        starts.append(position)
        position += len(cell)
    return starts


def test_every_header_starts_where_its_values_start() -> None:
    expected = {1: (1, 2, "gold"), 2: (2, 3, "silver-71"), 120: (120, 0, "a")}
    raw = {1: (1, 2, "gold"), 120: (120, 5, "x")}
    text = side_by_side(expected, raw, expected).splitlines()
    header, rule, rows = text[0], text[1], text[2:]
    assert set(rule) == {"-"} and len(rule) == len(header)
    starts = column_starts(header, list(HEADERS))
    assert starts[0] == 1  # "id" right-aligned over the widest id ("120")
    value_rows = {
        "1": ["1", "level 2 gold", "level 2 gold", "level 2 gold"],
        "2": ["2", "level 3 silver-71", "(missing) !", "level 3 silver-71"],
        "120": ["120", "level 0 a", "level 5 x !", "level 0 a"],
    }
    for line in rows:
        cells = value_rows[line.split()[0]]
        found = column_starts(line, cells)
        assert found[1:] == starts[1:], line  # text columns are left-aligned under their header
        assert found[0] + len(cells[0]) == starts[0] + len("id")  # ids right-aligned with "id"


def test_wide_cells_widen_their_column() -> None:
    badge = "b" * 40
    text = side_by_side({1: (1, 1, badge)}, {}, {1: (1, 1, badge)}).splitlines()
    header, row = text[0], text[2]
    assert column_starts(header, list(HEADERS))[2] == column_starts(row, ["(missing) !"])[0]


def test_the_default_demo_explains_its_missing_ids() -> None:
    shape = DemoShape()
    expected = expected_table(generate(shape).logical)
    absent = absent_keys(range(1, shape.users + 1), expected, expected, expected)
    assert absent == sorted(set(range(1, shape.users + 1)) - expected.keys())
    assert len(expected) + len(absent) == shape.users
    note = row_count_note(shape.users, expected, absent)
    assert f"{len(expected)} of {shape.users} users" in note
    assert "id " + ", ".join(map(str, absent)) in note
    assert row_count_note(3, {1: (1, 1, "a")}, []) == ""
