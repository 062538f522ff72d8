"""SIGINT/SIGTERM as a request to stop a pipeline at a micro-batch boundary.

While a :class:`StopSignals` is active in the main thread, the first SIGINT or SIGTERM only
records the signal (``received``); the pipeline's wait loop polls it and stops the query between
two batches, so no py4j call is interrupted and no traceback is printed. A second signal exits at
once with 128 + its number: nothing committed is lost (the sink commits a batch and its id in one
transaction; Spark re-runs an uncommitted batch on the next run, which the sink applies once).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from types import FrameType, TracebackType
from typing import Any


class StopSignals:
    """Context manager turning SIGINT/SIGTERM into a stop request; call it to ask "stop now?"."""

    def __init__(self, prefix: str = "upsertmat") -> None:
        self.prefix = prefix
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in (signal.SIGINT, signal.SIGTERM):
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def reinstall(self) -> None:
        """Take the signals back: creating a SparkContext installs pyspark's own SIGINT handler
        (it cancels every Spark job and raises KeyboardInterrupt inside whatever py4j call runs)."""
        if self._previous:
            for number in self._previous:
                signal.signal(number, self._handle)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous.clear()

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.received is not None:
            sys.stderr.write(f"{self.prefix}: interrupted again: exiting now\n")
            sys.stderr.flush()
            os._exit(128 + number)
        self.received = number
        sys.stderr.write(f"{self.prefix}: stopping at the next micro-batch boundary (again to exit now)\n")
        sys.stderr.flush()

    def request(self, number: int = signal.SIGINT) -> None:
        """Ask to stop as if signal ``number`` had arrived (e.g. from a key press)."""
        if self.received is None:
            self.received = number

    def __call__(self) -> bool:
        return self.received is not None

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + (self.received or signal.SIGINT)

    @property
    def name(self) -> str:
        """``SIGINT`` or ``SIGTERM``."""
        return signal.Signals(self.received or signal.SIGINT).name
