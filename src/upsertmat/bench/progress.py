"""Progress of a benchmark run on a text stream (stderr): cell i/n, the cell, repetition, ETA.

On a terminal the current line is rewritten in place; otherwise one line is written per
finished cell, so logs stay readable. The ETA is the mean wall time per finished cell times
the cells left (cells differ a lot in cost, so it is rough early on).
"""

from __future__ import annotations

import time
from typing import TextIO

from .runner import Cell, CellResult


def format_duration(seconds: float) -> str:
    """``75.3`` -> ``"1m15s"``; under a minute ``"12s"``; hours as ``"1h02m"``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


class Progress:
    """Writes progress events to ``stream``; see the module docstring."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._start = time.monotonic()
        self._finished = 0
        self._total = 0
        self._index = 0
        self._cell: Cell | None = None

    def _eta(self) -> str:
        if not self._finished:
            return "ETA ?"
        per_cell = (time.monotonic() - self._start) / self._finished
        return f"ETA {format_duration(per_cell * (self._total - self._finished))}"

    def _write_live(self, text: str) -> None:
        if self._tty:
            self._stream.write("\r\x1b[2K" + text)
            self._stream.flush()

    def cell_started(self, index: int, total: int, cell: Cell) -> None:
        """A cell begins."""
        self._index, self._total, self._cell = index, total, cell
        self._write_live(f"[{index}/{total}] {cell.label()} ... {self._eta()}")

    def repetition_started(self, repetition: int, repetitions: int) -> None:
        """A repetition of the current cell begins."""
        if self._cell is not None:
            where = f"[{self._index}/{self._total}] {self._cell.label()}"
            self._write_live(f"{where} rep {repetition}/{repetitions} {self._eta()}")

    def cell_finished(self, result: CellResult) -> None:
        """A cell is done: one permanent line with its outcome."""
        self._finished += 1
        estimate = result.estimate
        measured = "-" if estimate is None else f"{estimate:.3g} ops/ms"
        line = (
            f"[{self._index}/{self._total}] {result.cell.label()}: {result.status} {measured} "
            f"({result.elapsed_s:.1f}s) {self._eta()}"
        )
        if self._tty:
            self._stream.write("\r\x1b[2K")
        self._stream.write(line + "\n")
        self._stream.flush()
