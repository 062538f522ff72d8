"""The files a replay reads and writes must be distinct: ``-o x.jsonl x.jsonl`` would truncate
its input before reading a line, and a dead-letter file that is the input grows while it is
read. :func:`check_distinct_files` refuses such a run before anything is opened."""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from upsertmat.errors import CliError


def _identity(path: Path) -> tuple[int, int] | str | None:
    """What tells two names of one file apart from two files: a regular file's device and
    inode, the resolved path of a file still to be created, None for anything else (a device
    such as /dev/null, a pipe), which several outputs may share."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return os.path.realpath(path)
    except OSError:
        return None  # opening it fails later with its own message
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def check_distinct_files(input_name: str, written: Sequence[tuple[str, Path]]) -> None:
    """CliError (usage) if a file of ``written`` (each with the flag naming it) is the input
    ``input_name`` (``-``: stdin) or another of them. Names are compared as files: a link or
    another spelling of the same file counts, and so does a stdin redirected from a file.
    O(number of files) ``stat`` calls."""
    seen: dict[tuple[int, int] | str, str] = {}
    if input_name == "-":
        with contextlib.suppress(OSError, ValueError, AttributeError):
            status = os.fstat(sys.stdin.fileno())
            if stat.S_ISREG(status.st_mode):
                seen[(status.st_dev, status.st_ino)] = "the input (stdin)"
    else:
        identity = _identity(Path(input_name))
        if identity is not None:
            seen[identity] = f"the input {input_name}"
    for flag, path in written:
        identity = _identity(path)
        if identity is None:
            continue
        if identity in seen:
            raise CliError(
                f"{flag} {path} is the same file as {seen[identity]}; writing it would destroy what is read "
                "or written there: choose another file"
            )
        seen[identity] = f"{flag} {path}"
