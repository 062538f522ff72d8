"""An exclusive lock on a state directory, so two backends never share one database.

The lock is ``fcntl.flock(LOCK_EX | LOCK_NB)`` on the file ``upsertmat.lock`` inside the
backend's own directory (``STATE_DIR/<backend>/<name>/``), named so it never collides with
RocksDB's ``LOCK``, LMDB's ``lock.mdb`` (of older state directories) or the CLI's lock on
``STATE_DIR`` itself. flock locks belong to an open file description, so a second backend in
the *same* process is refused too.
The kernel drops the lock when the process dies (even by SIGKILL): a stale lock file is
harmless. The holder's pid is written into the file for the error message only: when it cannot
be written (a full disk), the lock is held all the same.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from .errors import StateLockedError, os_failure

LOCK_NAME = "upsertmat.lock"


class DirectoryLock:
    """Holds the lock of ``directory`` (created if missing) from construction to :meth:`release`.

    ``name``: the lock file's name (the replay state directory uses ``lock``; a backend's own
    directory ``upsertmat.lock``; the gateway's data root ``gateway.lock``); ``what`` names the
    directory in the messages of a failure. The one file lock of upsertmat.
    """

    def __init__(self, directory: Path, name: str = LOCK_NAME, what: str = "the state directory") -> None:
        self.path = directory / name
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as error:
            raise os_failure(error, f"cannot lock {what} {directory}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = "unknown"
            with contextlib.suppress(OSError):
                holder = os.read(fd, 32).decode("ascii", "replace").strip() or holder
            os.close(fd)
            raise StateLockedError(
                f"state directory {directory} is in use by another upsertmat process (lock {self.path} "
                f"is held by pid {holder}); stop the other process or use another --state-dir"
            ) from None
        except OSError as error:
            os.close(fd)
            raise os_failure(error, f"cannot lock {what} {directory}") from None
        with contextlib.suppress(OSError):  # the pid is for messages only
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode("ascii"))
        self._fd: int | None = fd

    def release(self) -> None:
        """Unlock (idempotent)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
