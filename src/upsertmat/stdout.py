"""Data a command writes to stdout: a failed write said in one line, a reader that cut it short.

Commands that print data (a report, a summary, a plan) write it with :func:`write_data`: a full
device or an I/O error is a :class:`~upsertmat.errors.CliError` with exit code 4, said once
(``cannot write stdout: No space left on device``); a closed pipe raises ``BrokenPipeError``,
which ``main`` turns into the quiet exit 141.

When the reader has gone, :func:`silence` points fd 1 at ``/dev/null`` (the interpreter's final
flush of what is still buffered would otherwise fail again, with a second traceback) and gives
the exit code 141, as Unix tools have on SIGPIPE.

A reader that takes part of the data and leaves (``upsertmat check-keys ... | head -c 1``)
raises nothing when the data fit the pipe's buffer: the write finished before the reader left.
:func:`cut_short` tells: the data is still in the pipe, the reader is gone. It waits a moment
(at most :data:`DRAIN_WAIT` seconds, and only while data is unread) for the reader to either
take the data or leave, so the exit code does not depend on which process the scheduler ran
first.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import stat
import struct
import sys
import termios
import time

from upsertmat.errors import CliError, ExitCode

DRAIN_WAIT = 5.0
"""Seconds :func:`cut_short` waits at most for a reader that neither reads nor leaves."""


def write_data(text: str) -> None:
    """Write ``text`` to stdout and flush it. CliError (exit 4) if the device fails; a
    ``BrokenPipeError`` (the reader went away) propagates."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        # What could not be written stays buffered; the interpreter's final flush would fail on
        # it again ("Exception ignored ...", exit 120): the rest goes to /dev/null instead.
        silence()
        raise CliError(f"cannot write stdout: {error.strerror or error}", ExitCode.IO) from None


def unread_bytes(descriptor: int) -> int:
    """Bytes written to the pipe ``descriptor`` and not read yet (FIONREAD)."""
    data = fcntl.ioctl(descriptor, termios.FIONREAD, b"\0\0\0\0")
    count: int = struct.unpack("i", data)[0]
    return count


def cut_short(descriptor: int = 1, wait: float = DRAIN_WAIT) -> bool:
    """True if ``descriptor`` is a pipe whose reader went away leaving written data unread:
    what was written was cut short, and the command should exit 141 as if the write had
    failed. A reader that took everything and then left lost nothing (False).

    While data is unread and the reader is there, waits for either, at most ``wait`` seconds
    (a reader that keeps neither reading nor leaving, ``| (sleep 60; cat)``, gets its data
    later: False). Never blocks otherwise; O(1) system calls per 50 ms waited.
    """
    try:
        if not stat.S_ISFIFO(os.fstat(descriptor).st_mode):
            return False
        poller = select.poll()
        poller.register(descriptor, 0)  # POLLERR (the reader closed the pipe) is always reported
        deadline = time.monotonic() + wait
        while True:
            if not unread_bytes(descriptor):
                return False
            if any(events & select.POLLERR for _, events in poller.poll(50)):
                return bool(unread_bytes(descriptor))
            if time.monotonic() >= deadline:
                return False
    except (OSError, ValueError):
        return False


def silence() -> int:
    """Point stdout (fd 1) at ``/dev/null`` and return 141 (128 + SIGPIPE): what a command does
    once stdout's reader has gone, quietly, as Unix tools do. Every caller's one way to stop."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, 1)
        finally:
            os.close(devnull)
    return int(ExitCode.CLOSED_PIPE)
