"""A one-line progress report of ``upsertmat replay`` on stderr for long runs.

Shown when stderr is a terminal, or when asked (``--progress``); never when piping unless
asked. The line is rewritten in place (carriage return) at most every ``interval`` seconds, and the
clock is read only every 1024 updates, so an update costs a counter increment. Every figure is
this run's (a resumed run counts from its first line, not from the stream's), so the rate is
what this process achieves and the count never goes down.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

INTERVAL = 0.5
"""Seconds between two redraws (the default of :class:`Progress`)."""


class Progress:
    """Counts lines and rewrites ``PREFIX: N lines, M changes emitted, ... lines/s``."""

    def __init__(
        self, prefix: str, enabled: bool, stream: TextIO | None = None, interval: float | None = None
    ) -> None:
        self.prefix = prefix
        self.enabled = enabled
        self.stream = stream if stream is not None else sys.stderr
        self.interval: float = INTERVAL if interval is None else interval
        self._start = time.monotonic()
        self._next = self._start + self.interval
        self._width = 0

    @staticmethod
    def wanted(flag: bool | None, stream: TextIO | None = None) -> bool:
        """``flag`` if given (``--progress``/``--no-progress``), else whether stderr is a TTY."""
        if flag is not None:
            return flag
        target = stream if stream is not None else sys.stderr
        return bool(getattr(target, "isatty", lambda: False)())

    def update(self, lines: int, emitted: int, skipped: int) -> None:
        """Maybe redraw; call once per input line with this run's counts so far. O(1)."""
        if not self.enabled or lines & 1023:
            return
        now = time.monotonic()
        if now >= self._next:
            self._next = now + self.interval
            self._draw(lines, emitted, skipped, now)

    def finish(self, lines: int, emitted: int, skipped: int) -> None:
        """Draw the final figures and end the line (only if enabled)."""
        if self.enabled:
            self._draw(lines, emitted, skipped, time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self, lines: int, emitted: int, skipped: int, now: float) -> None:
        elapsed = max(now - self._start, 1e-9)
        text = f"{self.prefix}: {lines} lines, {emitted} changes emitted"
        if skipped:
            text += f", {skipped} skipped"
        text += f", {lines / elapsed:,.0f} lines/s"
        self.stream.write(f"\r{text.ljust(self._width)}")
        self.stream.flush()
        self._width = len(text)
