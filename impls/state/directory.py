"""The on-disk directory of a byte backend: lock, crash-safe creation, validation.

Layout of a backend directory ``D`` (``STATE_DIR/<backend>/<name>``, or a temporary directory
removed on close)::

    D/upsertmat.lock   the lock (see locking.py)
    D/db/              the engine's database, holding the format marker under META key

A new database is built in ``D/db.new``, marked, closed and only then renamed to ``D/db``, so a
process killed while creating one leaves either no ``db`` (the next open starts afresh) or a
complete, marked one. Anything else in ``D`` means it is not a state directory of this backend:
a clear :class:`CorruptStateError`, never a silently empty state.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import CorruptStateError, os_failure
from .files import fsync_directory
from .locking import LOCK_NAME, DirectoryLock

DB_NAME = "db"
NEW_DB_NAME = "db.new"


class StateDirectory:
    """Locks ``path`` (or a fresh temporary directory) until :meth:`close`."""

    def __init__(self, path: Path | None, engine: str) -> None:
        self.engine = engine
        self.temporary = path is None
        try:
            self.root = Path(tempfile.mkdtemp(prefix=f"upsertmat-{engine}-")) if path is None else Path(path)
        except OSError as error:
            raise os_failure(error, f"cannot create a temporary {engine} directory") from None
        if self.root.exists() and not self.root.is_dir():
            raise CorruptStateError(f"{self.root} is not a directory, so it cannot hold {engine} state")
        self.lock = DirectoryLock(self.root)
        self.db = self.root / DB_NAME

    def prepare(self, create: Callable[[Path], None]) -> None:
        """Make sure ``db`` exists: build it with ``create(directory)`` if missing.

        CorruptStateError if the directory holds anything that is not ours; a failure of the
        file system classified (:func:`~.errors.os_failure`: a full disk is a StorageFullError);
        ``create`` classifies its engine's own errors.
        """
        try:
            if self.db.exists():
                if not self.db.is_dir():
                    raise CorruptStateError(f"{self.db} is not a {self.engine} database directory")
                return
            foreign = sorted(p.name for p in self.root.iterdir() if p.name not in (LOCK_NAME, NEW_DB_NAME))
        except OSError as error:
            raise os_failure(error, f"cannot read the {self.engine} state directory {self.root}") from None
        if foreign:
            raise CorruptStateError(
                f"{self.root} is not an upsertmat {self.engine} state directory "
                f"(no {DB_NAME}/, but it holds {', '.join(foreign)})"
            )
        new = self.root / NEW_DB_NAME
        shutil.rmtree(new, ignore_errors=True)  # left by a process killed while creating
        create(new)
        try:
            os.rename(new, self.db)
            fsync_directory(self.root)
        except OSError as error:
            raise os_failure(error, f"cannot create the {self.engine} database {self.db}") from None

    def close(self) -> None:
        """Release the lock; remove the directory if it was temporary."""
        self.lock.release()
        if self.temporary:
            shutil.rmtree(self.root, ignore_errors=True)
