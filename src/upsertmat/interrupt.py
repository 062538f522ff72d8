"""SIGINT and SIGTERM, one behaviour for every command: a stop with one line, never a traceback.

While a :class:`StopSignals` is active (entered in the main thread; they nest, the innermost
decides), the first SIGINT or SIGTERM of the command either

- raises :class:`Interrupted` at once (a :class:`KeyboardInterrupt`), when the frame is not
  ``busy``: for work that may stop anywhere, such as importing, parsing, loading a job, or
  waiting for Spark's JVM to start (:func:`call_interruptibly`); or
- is only recorded (``received``; the frame is true when called) when the frame is ``busy``: the
  work stops at its next boundary (after the line being replayed, at a micro-batch boundary),
  so that nothing is cut half-way. A frame with ``notice`` says, if the stop has not happened a
  second later, what it waits for.

After the first signal, later ones never raise (the clean-up that the first one started must
run to its end); in a frame with ``force`` a second one exits at once, ``os._exit(128 + n)``
after one line: what was committed stays committed, what was not is redone by a rerun.

The command line keeps a frame active from its first instant to its last (``upsertmat`` ->
:mod:`upsertmat.__main__` -> :func:`upsertmat.cli.main`), so a signal at any moment ends a
command with one line, ``upsertmat COMMAND: interrupted (SIGINT)`` (or the command's own, more
precise one), and exit code 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM.

Spark's ``SparkContext`` installs a SIGINT handler of its own when it is created in the main
thread (it cancels every Spark job and raises KeyboardInterrupt inside whatever py4j call
runs, which prints a screen of tracebacks); :func:`call_interruptibly` creates it in a helper
thread instead while a frame is active, and keeps the main thread free to react.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any, TypeVar

_T = TypeVar("_T")

NOTICE_DELAY_SECONDS = 1.0
"""A frame's ``notice`` is printed only if the stop has not happened this long after the signal."""
_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_WAIT_SECONDS = 0.2

_frames: list[StopSignals] = []  # the active frames, innermost last (main thread only)
_received: list[int] = []  # the command's first signal (at most one entry)


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread by the first SIGINT or SIGTERM outside a ``busy`` frame."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number

    @property
    def exit_code(self) -> int:
        """128 + the signal's number."""
        return 128 + self.number

    @property
    def name(self) -> str:
        """``SIGINT`` or ``SIGTERM``."""
        return signal.Signals(self.number).name


class StopSignals:
    """A frame of the command's signal handling; a context manager (see the module docstring).

    ``prefix`` starts every line it prints (``upsertmat run``); ``busy``: a signal is recorded,
    not raised; ``notice``: printed (``PREFIX: NOTICE``) when a recorded signal has not stopped
    the work a second later; ``force``: a second signal exits at once. Call the frame to ask
    "was a signal received?". Outside the main thread a frame installs nothing and only records
    :meth:`request`.
    """

    def __init__(
        self, prefix: str = "upsertmat", *, busy: bool = False, notice: str | None = None, force: bool = False
    ) -> None:
        self.prefix = prefix
        self.busy = busy
        self.notice = notice
        self.force = force
        self._previous: dict[int, Any] = {}
        self._timer: threading.Timer | None = None
        self._received: int | None = None

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in _SIGNALS:
                self._previous[number] = signal.signal(number, _handle)
            _frames.append(self)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.quiet()
        if self in _frames:
            _frames.remove(self)
            if not _frames:
                _received.clear()
        for number, previous in self._previous.items():
            signal.signal(number, previous)
        self._previous.clear()

    @property
    def received(self) -> int | None:
        """The signal received (or requested) while this frame was active, else None (kept after
        the frame is left)."""
        return self._received

    def __call__(self) -> bool:
        return self.received is not None

    def request(self, number: int = signal.SIGINT) -> None:
        """Ask to stop as if signal ``number`` had arrived (e.g. from a key press)."""
        if self._received is None:
            self._received = number

    def check(self) -> None:
        """Raise :class:`Interrupted` if a signal was received (a boundary the work has reached)."""
        if self.received is not None:
            raise Interrupted(self.received)

    @property
    def exit_code(self) -> int:
        """128 + the signal's number (130 for SIGINT, 143 for SIGTERM)."""
        return 128 + (self.received or signal.SIGINT)

    @property
    def name(self) -> str:
        """``SIGINT`` or ``SIGTERM``."""
        return signal.Signals(self.received or signal.SIGINT).name

    def say(self, text: str) -> None:
        """Print ``PREFIX: TEXT`` on stderr, after cancelling a pending notice."""
        self.quiet()
        _line(f"{self.prefix}: {text}")

    def quiet(self) -> None:
        """Cancel a pending notice (the stop happened)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _recorded(self) -> None:
        if self.notice is not None and self._timer is None:
            self._timer = threading.Timer(NOTICE_DELAY_SECONDS, _line, (f"{self.prefix}: {self.notice}",))
            self._timer.daemon = True
            self._timer.start()


def _line(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed: the exit code still says it
        pass


def _handle(number: int, frame: FrameType | None) -> None:
    top = _frames[-1] if _frames else None
    if _received:
        if top is not None and top.force:
            top.quiet()
            _line(f"{top.prefix}: interrupted again ({signal.Signals(number).name}): exiting now")
            os._exit(128 + number)
        return
    _received.append(number)
    for active in _frames:
        active._received = active._received or number
    if top is not None and top.busy:
        top._recorded()
        return
    raise Interrupted(number)


def interrupted(prefix: str, error: KeyboardInterrupt, detail: str = "") -> int:
    """Print ``PREFIX: interrupted (SIGINT)DETAIL`` on stderr; the exit code, 128 + the signal's
    number (a KeyboardInterrupt raised by other code counts as SIGINT)."""
    number = error.number if isinstance(error, Interrupted) else int(signal.SIGINT)
    _line(f"{prefix}: interrupted ({signal.Signals(number).name}){detail}")
    return 128 + number


def call_interruptibly(function: Callable[[], _T]) -> _T:
    """``function()``, its result or its exception; in the main thread while a frame is active,
    run in a daemon helper thread while this thread waits, so that a signal ends the wait at once
    (:class:`Interrupted`, or recorded if the frame is busy) however long ``function`` blocks
    (starting a JVM, a py4j call). Interrupted, the helper is left to end with the process.

    Raises Interrupted at once if a signal was received before the call.
    """
    if threading.current_thread() is not threading.main_thread() or not _frames:
        return function()
    _frames[-1].check()
    done = threading.Event()
    results: list[_T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            results.append(function())
        except BaseException as error:
            errors.append(error)
        finally:
            done.set()

    threading.Thread(target=target, name="upsertmat-interruptible", daemon=True).start()
    while not done.wait(_WAIT_SECONDS):
        pass
    if errors:
        raise errors[0]
    return results[0]
