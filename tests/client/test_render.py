"""The result modes' renderers: tableau lines are exact; the table and changelog screens (issue
45, item 7: never instantiated by a test before) drawn on rich consoles that write to strings,
fed with what a real SQLite sink committed and read back (``upsertmat.sinks``): live on
a terminal (one page, the keys to press), and without one (a pipe, a file) the final state
printed once, plainly, ending with a newline (issue 45, item 6)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from upsertmat.client.render import ChangelogScreen, Tableau, TableScreen, counted
from upsertmat.jobs.results import ResultChange, Snapshot
from upsertmat.sinks import Column, open_sink, read_changes, read_snapshot

COLUMNS = (Column("id", "bigint"), Column("v", "string"), Column("x", "double"))
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_tableau_lines_are_exact(tmp_path: Path) -> None:
    for format, expected in (
        ("text", 'batch 3: +U [1, 1.0, true, null, "x"]\n'),
        ("jsonl", json.dumps({"batch": 3, "pos": 7, "op": "+U", "row": [1, 1.0, True, None, "x"]}) + "\n"),
    ):
        stream = io.StringIO()
        Tableau(stream, format).add_changes([ResultChange(7, 3, "+U", (1, 1.0, True, None, "x"))], 0.0)
        assert stream.getvalue() == expected


@pytest.fixture
def committed(tmp_path: Path) -> tuple[Snapshot, list[ResultChange]]:
    """Two batches committed by a real sink, read back as the embedded client reads them."""
    url = str(tmp_path / "sink.db")
    sink = open_sink(url, "t", COLUMNS, (0,), changelog=True)
    sink.apply_batch("q", 0, [("+I", (number, f"v{number}", number / 2)) for number in range(8)])
    sink.apply_batch("q", 1, [("-D", (0, "v0", 0.0)), ("-U", (1, "v1", 0.5)), ("+U", (1, "w1", 1.5))])
    sink.close()
    found = read_snapshot(url, "t", ["id"])
    changes = [ResultChange(c.pos, c.batch_id, c.op, c.row) for c in read_changes(url, "t", 0, 100)]
    return Snapshot(found.batch_id, found.columns, found.rows, found.total), changes


def terminal(height: int = 12) -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=100, height=height, color_system=None)


def plain() -> Console:
    return Console(file=io.StringIO(), force_terminal=False, width=100)


def text_of(console: Console) -> str:
    stream = console.file
    assert isinstance(stream, io.StringIO)
    return stream.getvalue()


def drawn(renderable: object) -> str:
    """What a screen shows now, as plain text."""
    out = Console(file=io.StringIO(), width=100, color_system=None)
    out.print(renderable)
    return text_of(out)


def test_the_table_screen_pages_on_a_terminal(committed: tuple[Snapshot, list[ResultChange]]) -> None:
    snapshot, _ = committed
    assert (snapshot.batch_id, snapshot.total, len(snapshot.rows)) == (1, 7, 7)
    console = terminal(height=12)  # 5 rows a page
    screen = TableScreen("job j-1", max_rows=100, console=console)
    screen.show_table(snapshot, 12.5)
    first = drawn(screen.render())
    assert first.splitlines()[0] == "job j-1 | batch 1 | 7 rows | 12.5 changes/s"
    ids = [line.split()[1] for line in first.splitlines() if re.match(r"^│ \d", line)]
    assert ids == ["1", "2", "3", "4", "5"]
    assert "│ 1  │ w1 │ 1.5 │" in first and "v0" not in first  # batch 1's table: 0 deleted, 1 updated
    assert first.rstrip().endswith("rows 1-5 of 7; n/p: next/previous page, Ctrl-C: stop")
    screen.turn(1)
    second = drawn(screen.render())
    assert [line.split()[1] for line in second.splitlines() if re.match(r"^│ \d", line)] == ["6", "7"]
    assert "rows 6-7 of 7" in second
    screen.turn(5)  # no page past the last
    assert "rows 6-7 of 7" in drawn(screen.render())
    screen.close()
    live = ANSI.sub("", text_of(console))
    assert "job j-1 | batch 1 | 7 rows" in live and "rows 6-7 of 7" in live  # drawn on the terminal


def test_without_a_terminal_the_table_is_printed_once_plainly(
    committed: tuple[Snapshot, list[ResultChange]],
) -> None:
    snapshot, _ = committed
    console = plain()
    screen = TableScreen("job j-1", max_rows=100, console=console)
    screen.show_table(Snapshot(None, (), (), 0), 0.0)
    screen.show_table(snapshot, 3.0)
    assert text_of(console) == ""  # nothing drawn while it runs
    screen.close()
    out = text_of(console)
    assert out.endswith("\n") and "\x1b" not in out
    assert out.splitlines()[0] == "job j-1 | batch 1 | 7 rows | 3.0 changes/s"
    assert len([line for line in out.splitlines() if re.match(r"^│ \d", line)]) == 7  # every row held
    assert out.splitlines()[-1] == "rows 1-7 of 7"  # no keys to press
    assert out == drawn(screen.render())


def test_a_table_bound_by_max_rows_says_so(committed: tuple[Snapshot, list[ResultChange]]) -> None:
    snapshot, _ = committed
    console = plain()
    screen = TableScreen("t", max_rows=3, console=console)
    screen.show_table(Snapshot(snapshot.batch_id, snapshot.columns, snapshot.rows[:3], snapshot.total), 0.0)
    screen.close()
    assert text_of(console).splitlines()[-1] == "rows 1-3 of 7 (the first 3 held: --max-table-rows)"
    empty = plain()
    nothing = TableScreen("t", max_rows=3, console=empty)
    nothing.close()
    assert text_of(empty).splitlines()[0] == "t | no batch committed yet | 0 rows | 0.0 changes/s"
    assert text_of(empty).splitlines()[-1] == "no rows"


def test_the_changelog_screen_on_a_terminal_and_without(
    committed: tuple[Snapshot, list[ResultChange]],
) -> None:
    _, changes = committed
    assert [change.op for change in changes] == ["+I"] * 8 + ["-D", "-U", "+U"]
    console = terminal(height=10)  # the newest 3 fit
    screen = ChangelogScreen("job j-1", keep=100, console=console)
    screen.add_changes(changes[:8], 0.0)
    screen.add_changes(changes[8:], 4.0)
    now = drawn(screen.render())
    assert now.splitlines()[0] == "job j-1 | last batch 1 | 11 changes | 4.0 changes/s"
    assert [line.split("│")[2].strip() for line in now.splitlines() if re.match(r"^│ \d", line)] == [
        "-D",
        "-U",
        "+U",
    ]
    assert '[1, "w1", 1.5]' in now and now.rstrip().endswith("the last 11 changes are held; Ctrl-C: stop")
    screen.close()
    assert "11 changes" in ANSI.sub("", text_of(console))

    console = plain()
    kept = ChangelogScreen("job j-1", keep=4, console=console)
    kept.add_changes(changes, 4.0)
    assert text_of(console) == ""
    kept.close()
    out = text_of(console)
    assert out.endswith("\n") and "\x1b" not in out and "Ctrl-C" not in out
    rows = [line for line in out.splitlines() if re.match(r"^│ \d", line)]
    assert [row.split("│")[2].strip() for row in rows] == ["+I", "-D", "-U", "+U"]  # the last 4 held
    assert out.splitlines()[-1] == "4 changes shown (the last 4 held)"


def test_counted() -> None:
    assert [counted(n, "row") for n in (0, 1, 2, 1234)] == ["0 rows", "1 row", "2 rows", "1,234 rows"]
    assert counted(1, "batch", "batches") == "1 batch" and counted(3, "batch", "batches") == "3 batches"
