"""The three result modes, drawn the same way for an embedded run and for a gateway's job.

- ``table`` (:class:`TableScreen`): the sink table as the last committed batch left it, redrawn
  after each batch with ``rich`` (batch id, rows, changes/s; one page at a time: ``n``/``p`` page
  when stdin is a terminal). At most ``max_rows`` rows are held (the rest is counted).
- ``changelog`` (:class:`ChangelogScreen`): each committed batch's table changes (``+I -U +U
  -D``) with the batch id; the last ``keep`` are held and the newest that fit are shown.
- Without a terminal on stdout the two screens print their last state once, when they close:
  the held rows or changes as a plain table, ending with a newline.
- ``tableau`` (:class:`Tableau`): the same changes as plain lines on stdout, or JSON Lines
  (``--format jsonl``): ``{"batch": 3, "pos": 17, "op": "+I", "row": [1, 2, "gold"]}``; nothing
  else goes to stdout.

Renderers are fed from whichever thread sees a committed batch; each call takes a lock.
Drawing a table is O(rows on the page); holding costs O(max_rows) / O(keep).
"""

from __future__ import annotations

import json
import os
import select
import sys
import termios
import threading
import tty
from collections import deque
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..jobs.results import Renderer, ResultChange, Snapshot
from .modes import RESULT_MODES, TABLEAU_FORMATS

__all__ = [
    "RESULT_MODES",
    "TABLEAU_FORMATS",
    "ChangelogScreen",
    "PageKeys",
    "Renderer",
    "ResultChange",
    "Snapshot",
    "TableScreen",
    "Tableau",
    "TerminalViews",
]

OP_STYLES = {"+I": "green", "+U": "cyan", "-U": "yellow", "-D": "red"}


def cell(value: Any) -> str:
    """A value as a table cell: JSON spelling (``null``, ``true``, ``1.0``), strings as they are."""
    return value if isinstance(value, str) else json.dumps(value)


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``1 row``, ``2 rows``, ``1,234 rows`` (``plural`` when adding an s is wrong)."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def rate_text(rate: float) -> str:
    """``1,234 changes/s``; one decimal below 100 (a few changes a second stay visible)."""
    return f"{rate:,.1f} changes/s" if rate < 100 else f"{rate:,.0f} changes/s"


def change_line(change: ResultChange) -> str:
    """``batch 3: +I [1, 2, "gold"]`` (the row as a JSON array: types exact)."""
    return f"batch {change.batch_id}: {change.op} {json.dumps(list(change.row))}"


def change_json(change: ResultChange) -> str:
    """``{"batch": 3, "pos": 17, "op": "+I", "row": [1, 2, "gold"]}``."""
    return json.dumps({"batch": change.batch_id, "pos": change.pos, "op": change.op, "row": list(change.row)})


class _Screen:
    """A ``rich`` live region on stdout's terminal, redrawn under a lock. Without a terminal (a
    pipe, a file) there is no live region: the screen prints its state once, plainly, when it
    closes (no colors, no keys to press, a final newline)."""

    def __init__(self, title: str, console: Console | None = None) -> None:
        self.title = title
        self.console = console or Console()
        self.lock = threading.Lock()
        self.live: Live | None = None
        if self.console.is_terminal:
            self.live = Live(console=self.console, auto_refresh=False, vertical_overflow="crop")
            self.live.start()

    @property
    def plain(self) -> bool:
        """True without a terminal: the state is printed once, at the end."""
        return self.live is None

    def height(self) -> int:
        return max(3, self.console.size.height - 7)

    def draw(self) -> None:
        if self.live is not None:
            self.live.update(self.render(), refresh=True)

    def render(self) -> Group:
        raise NotImplementedError

    def close(self) -> None:
        with self.lock:
            if self.live is not None:
                self.draw()
                self.live.stop()
            else:
                self.console.print(self.render())


class TableScreen(_Screen):
    """``table`` mode: one page of the latest snapshot, a header and a footer."""

    def __init__(self, title: str, max_rows: int, console: Console | None = None) -> None:
        self.max_rows = max_rows
        self.snapshot = Snapshot(None, (), (), 0)
        self.rate = 0.0
        self.page = 0
        super().__init__(title, console)
        self.draw()

    def show_table(self, snapshot: Snapshot, rate: float) -> None:
        with self.lock:
            self.snapshot, self.rate = snapshot, rate
            self.page = min(self.page, max(0, (len(snapshot.rows) - 1) // self.height()))
            self.draw()

    def add_changes(self, changes: Sequence[ResultChange], rate: float) -> None:
        return None

    def turn(self, pages: int) -> None:
        """Show ``pages`` pages further (negative: back)."""
        with self.lock:
            last = max(0, (len(self.snapshot.rows) - 1) // self.height())
            self.page = min(max(0, self.page + pages), last)
            self.draw()

    def render(self) -> Group:
        snapshot = self.snapshot
        size = len(snapshot.rows) if self.plain else self.height()  # plain: every row held
        first = 0 if self.plain else self.page * size
        rows = snapshot.rows[first : first + size]
        batch = "no batch committed yet" if snapshot.batch_id is None else f"batch {snapshot.batch_id}"
        total = counted(snapshot.total, "row")
        header = Text(f"{self.title} | {batch} | {total} | {rate_text(self.rate)}", "bold")
        table = Table(*snapshot.columns) if snapshot.columns else Table("(empty)")
        for row in rows:
            table.add_row(*(cell(value) for value in row))
        held = len(snapshot.rows)
        shown = f"rows {first + 1:,}-{first + len(rows):,} of {snapshot.total:,}" if rows else "no rows"
        bound = f" (the first {held:,} held: --max-table-rows)" if held < snapshot.total else ""
        keys = "" if self.plain else "; n/p: next/previous page, Ctrl-C: stop"
        footer = Text(f"{shown}{bound}{keys}", "dim")
        return Group(header, table, footer)


class ChangelogScreen(_Screen):
    """``changelog`` mode: the newest held changes that fit on the screen."""

    def __init__(self, title: str, keep: int, console: Console | None = None) -> None:
        self.changes: deque[ResultChange] = deque(maxlen=keep)
        self.count = 0
        self.rate = 0.0
        super().__init__(title, console)
        self.draw()

    def show_table(self, snapshot: Snapshot, rate: float) -> None:
        return None

    def add_changes(self, changes: Sequence[ResultChange], rate: float) -> None:
        with self.lock:
            self.changes.extend(changes)
            self.count += len(changes)
            self.rate = rate
            self.draw()

    def render(self) -> Group:
        last = self.changes[-1].batch_id if self.changes else None
        batch = "no change yet" if last is None else f"last batch {last}"
        header = Text(
            f"{self.title} | {batch} | {counted(self.count, 'change')} | {rate_text(self.rate)}", "bold"
        )
        table = Table("batch", "op", "row")
        shown = list(self.changes) if self.plain else list(self.changes)[-self.height() :]
        for change in shown:
            style = OP_STYLES.get(change.op, "")
            table.add_row(str(change.batch_id), Text(change.op, style), json.dumps(list(change.row)))
        if self.plain:
            held = "" if len(self.changes) == self.count else f" (the last {len(self.changes):,} held)"
            footer = Text(f"{counted(len(shown), 'change')} shown{held}", "dim")
        else:
            held = "change is" if len(self.changes) == 1 else "changes are"
            footer = Text(f"the last {len(self.changes):,} {held} held; Ctrl-C: stop", "dim")
        return Group(header, table, footer)


class Tableau:
    """``tableau`` mode: one line per change on ``stream`` (text or JSON Lines), flushed per batch."""

    def __init__(self, stream: TextIO, format: str = "text") -> None:
        self.stream = stream
        self.line = change_json if format == "jsonl" else change_line
        self.lock = threading.Lock()

    def show_table(self, snapshot: Snapshot, rate: float) -> None:
        return None

    def add_changes(self, changes: Sequence[ResultChange], rate: float) -> None:
        with self.lock:
            for change in changes:
                self.stream.write(self.line(change) + "\n")
            self.stream.flush()

    def close(self) -> None:
        with self.lock:
            self.stream.flush()


def make_renderer(mode: str, title: str, *, max_rows: int, keep: int, format: str) -> Renderer:
    """The renderer of ``mode`` (one of :data:`RESULT_MODES`); screens draw on stdout."""
    if mode == "table":
        return TableScreen(title, max_rows)
    if mode == "changelog":
        return ChangelogScreen(title, keep)
    return Tableau(sys.stdout, format)


class PageKeys:
    """While active and stdin is a terminal: ``n``/space and ``p`` turn the table's pages.

    A daemon thread reads single keys (cbreak mode, restored on exit); O(1) per key.
    """

    def __init__(self, turn: Callable[[int], None]) -> None:
        self.turn = turn
        self.stopped = threading.Event()
        self.saved: list[Any] | None = None
        self.thread: threading.Thread | None = None

    def __enter__(self) -> PageKeys:
        if sys.stdin.isatty():
            fd = sys.stdin.fileno()
            self.saved = termios.tcgetattr(fd)
            tty.setcbreak(fd)
            self.thread = threading.Thread(target=self._read, args=(fd,), daemon=True)
            self.thread.start()
        return self

    def _read(self, fd: int) -> None:
        while not self.stopped.is_set():
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            key = os.read(fd, 1)
            if key in (b"n", b" "):
                self.turn(1)
            elif key == b"p":
                self.turn(-1)

    def __exit__(self, *exc: object) -> None:
        self.stopped.set()
        if self.thread is not None:
            self.thread.join(timeout=1)
        if self.saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, self.saved)


class TerminalViews:
    """The result modes of this module as an embedded run's :class:`~upsertmat.jobs.results.Views`
    (``RunOptions.views``): :func:`make_renderer`, and a table screen paged by ``n``/``p``."""

    def renderer(self, mode: str, title: str, *, max_rows: int, keep: int, format: str) -> Renderer:
        return make_renderer(mode, title, max_rows=max_rows, keep=keep, format=format)

    def keys(self, renderer: Renderer) -> AbstractContextManager[object]:
        if isinstance(renderer, TableScreen):
            return PageKeys(renderer.turn)
        return nullcontext()
