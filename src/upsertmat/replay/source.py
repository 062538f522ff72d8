"""The input of ``upsertmat replay``: a file or stdin, read line by line.

A failed read (an I/O error of the device, a file removed under a network mount) is an
:class:`InputFailed`, raised between two lines: every line before it was applied, so the run
stops at a commit point (docs/cli.md, exit 4).
"""

from __future__ import annotations

import contextlib
import sys
from typing import IO

from upsertmat.errors import CliError

from .failures import io_exit_code


class InputFailed(Exception):
    """Reading the input failed; ``message`` names the input and the cause."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def open_input(name: str) -> IO[bytes]:
    """The input ``name`` opened for reading (``-``: stdin). CliError if it cannot be opened
    (exit 2, or 4 for a device or space error)."""
    if name == "-":
        return sys.stdin.buffer
    try:
        return open(name, "rb")
    except OSError as error:
        raise CliError(f"cannot open input {name}: {error.strerror or error}", io_exit_code(error)) from None


def close_input(source: IO[bytes]) -> None:
    """Close an input file; what was read is read, so a failure to close loses nothing."""
    with contextlib.suppress(OSError):
        source.close()


def read_failure(error: OSError, name: str) -> InputFailed:
    """A failed read of the input ``name`` (``-``: stdin)."""
    shown = "stdin" if name == "-" else name
    return InputFailed(f"cannot read input {shown}: {error.strerror or error}")
