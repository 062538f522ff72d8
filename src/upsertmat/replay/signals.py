"""SIGINT and SIGTERM stop a replay at a line boundary."""

from __future__ import annotations

import signal
import threading
from types import FrameType


class SignalGuard:
    """While a line is being processed (``busy``) a signal only sets ``received``, and the
    loop stops after that line; otherwise (waiting for input) it raises KeyboardInterrupt at
    once. Handlers are installed only in the main thread and restored on exit. Use as a
    context manager.
    """

    def __init__(self) -> None:
        self.busy = False
        self.received: int | None = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> SignalGuard:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)  # type: ignore[arg-type]

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received = signum
        if not self.busy:
            raise KeyboardInterrupt

    @property
    def exit_code(self) -> int:
        """128 + the signal received (SIGINT if none was: a KeyboardInterrupt from elsewhere)."""
        return 128 + (self.received or signal.SIGINT)
