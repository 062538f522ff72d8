"""The file primitives every piece of persisted state uses: one place for how bytes reach disk.

- :func:`fsync_directory`: make a rename (or a new file) in a directory durable.
- :func:`write_atomically`: a file holds its old or its new content, never a mix (temp file in
  the same directory, flush, fsync, rename, fsync of the directory).
- :func:`open_regular`: open a state file for reading only if it is a regular file of a sane
  size, without blocking (a FIFO) and without reading a device (a symlink to ``/dev/zero``).

Used by the replay state directory (``upsertmat.impls.persistence.statedir``), the byte backends' database
directories (:mod:`.directory`) and savepoints (``impls.lifecycle.savepoint``).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO

from .errors import CorruptStateError


def fsync_directory(path: Path) -> None:
    """Fsync the directory ``path`` (its entries: renames, creations, removals)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_atomically(path: Path, write: Callable[[IO[bytes]], None]) -> None:
    """Write ``path`` through ``write`` so that it holds the old or the new content, never a mix.

    The temporary file is ``.NAME.tmp`` beside it: whoever opens the directory next may remove
    such leftovers of a killed writer (no manifest ever names them).
    """
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with open(temporary, "wb") as stream:
            write(stream)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    fsync_directory(path.parent)


def open_regular(path: Path, what: str, limit: int | None = None) -> IO[bytes]:
    """``path`` opened for reading if it is a regular file (of at most ``limit`` bytes).

    Never blocks and never reads a device: a FIFO, a socket or a device (also behind a
    symlink) is refused with a :class:`CorruptStateError` naming the file, before anything is
    read. FileNotFoundError and other OSErrors of ``open`` propagate.
    """
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise CorruptStateError(
                f"damaged state: {what} {path} is not a regular file; refusing to read it"
            )
        if limit is not None and info.st_size > limit:
            raise CorruptStateError(
                f"damaged state: {what} {path} has {info.st_size} bytes, more than any {what} "
                f"({limit}); refusing to read it"
            )
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
