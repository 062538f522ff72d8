"""A savepoint restored into a new state directory: the transaction behind ``upsertmat restore``.

:func:`restore_savepoint` creates the directory's state from a savepoint for any strategy and
backend (migration), as one instance of several when asked (rescaling: the instance imports
exactly the key groups of its range and records them, so a replay into it applies only the
changes routed to it). Everything it needs of the savepoint was checked when the savepoint was
opened (the same checks as ``inspect``); the data files of its key groups are verified before
anything is imported, and the import is one commit.

All or nothing: a restore that is refused or fails leaves the target as it found it — the
state it wrote removed (manifest, snapshots, database), the lock file gone if the restore
created it, and the directories it created removed — so the same command can run again. A
target that holds replay state already is refused naming that state. The errors are the
persistence layer's (:class:`~.errors.StateDirError`, :class:`~.errors.StateDirIOError`) and
the savepoint's (:class:`~upsertmat.impls.lifecycle.SavepointError`); whatever ``create``
raises propagates (after the clean-up).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...spec import Keys, Materializer
from ..lifecycle import Partition, Savepoint
from ..settings import Settings
from ..state import backend_database
from .errors import StateDirError
from .failures import classified, close_quietly
from .session import StateSession
from .statedir import LOCK_NAME

Create = Callable[[Keys, Settings], Materializer]


@dataclass(frozen=True)
class Restored:
    """What a restore made: ``keys`` context keys imported into ``path``, whose replay goes on
    at stream line ``lines`` with ``settings``; ``partition`` the key groups it owns (None:
    all); ``warning``: closing the state failed after everything was committed (None: it did
    not)."""

    path: Path
    keys: int
    lines: int
    settings: Settings
    partition: Partition | None
    warning: str | None = None


def partition_of(savepoint: Savepoint, parallelism: int, index: int) -> Partition | None:
    """The key groups instance ``index`` of ``parallelism`` restores from ``savepoint`` (None:
    all of them, a whole savepoint at parallelism 1). StateDirError if the savepoint holds only
    some key groups (it was taken of one instance) and this instance's are not among them."""
    manifest = savepoint.manifest
    held = manifest.replay.partition
    if held is None and parallelism == 1:
        return None
    wanted = Partition(manifest.max_parallelism, parallelism, index)
    if held is not None and not wanted.within(held):
        groups = wanted.groups
        raise StateDirError(
            f"savepoint {savepoint.path} holds only {held}; --parallelism {parallelism} --index {index} "
            f"would own key groups {groups.start}-{groups.stop - 1}, whose other keys it does not hold: "
            f"restore it as an instance whose key groups lie within its own (--parallelism "
            f"{held.parallelism} --index {held.index}, or a multiple of it)"
        )
    return wanted


def restore_savepoint(
    savepoint: Savepoint,
    path: Path,
    settings: Settings,
    create: Create,
    *,
    parallelism: int = 1,
    index: int = 0,
) -> Restored:
    """Create the state directory ``path`` from ``savepoint`` for ``settings`` (whose TTL must
    be the savepoint's), as instance ``index`` of ``parallelism``; see the module docstring.
    ``create`` builds the materializer. O(size of the restored key groups)."""
    manifest = savepoint.manifest
    partition = partition_of(savepoint, parallelism, index)
    replay = manifest.replay
    with _Target(path) as target:
        session = target.enter(StateSession.new(path, manifest.keys, settings, replay.arity))
        materializer = create(manifest.keys, session.settings)
        target.opened(materializer)
        with classified(materializer, path):
            try:
                session.attach(materializer)
            except StateDirError as error:
                if type(error) is not StateDirError:
                    raise
                # A database holding committed state without a manifest: nothing here is ours.
                raise StateDirError(
                    f"{error}. If a restore into {path} was killed at its very end, remove the directory and "
                    "run the restore again"
                ) from None
            keys = savepoint.load_into(
                materializer, manifest.keys, ttl=settings.ttl, parallelism=parallelism, index=index
            )
            session.restored(
                materializer,
                lines=replay.lines,
                now=manifest.now,
                misses=manifest.retract_misses if index == 0 else 0,
                runs=replay.runs,
                partition=partition,
            )
        warning = target.close_state()
        return Restored(path, keys, replay.lines, session.settings, partition, warning)


class _Target:
    """The target directory of a restore and what the restore did to it, to undo on failure:
    the directories it creates (``path`` and missing parents), the lock file if it was not
    there, the state of the session it opened, the materializer it created."""

    def __init__(self, path: Path) -> None:
        self.path = path
        created: list[Path] = []
        for directory in (path, *path.parents):
            if directory.exists():
                break
            created.append(directory)
        self.created = created  # deepest first
        self.lock_existed = (path / LOCK_NAME).exists()
        self.session: StateSession | None = None
        self.materializer: Materializer | None = None
        self.database_existed = False

    def __enter__(self) -> _Target:
        return self

    def enter(self, session: StateSession) -> StateSession:
        """Open (lock) ``session`` for this restore; note whether its backend's database is
        there already (then it is not this restore's to remove)."""
        session.__enter__()
        self.session = session
        database = backend_database(session.settings)
        self.database_existed = database is not None and database.parent.parent.exists()
        return session

    def opened(self, materializer: Materializer) -> None:
        """``materializer`` was created (and may hold a database open)."""
        self.materializer = materializer

    def close_state(self) -> str | None:
        """Close the materializer after the commit: a failure is a warning (what was committed
        is safe); None if it closed."""
        materializer, self.materializer = self.materializer, None
        if materializer is None:
            return None
        return close_quietly(materializer, "everything restored is committed")

    def __exit__(self, kind: object, error: object, traceback: object) -> None:
        session = self.session
        if error is None:
            if session is not None:
                session.__exit__(None, None, None)
            return
        # Undo: the materializer closed (quietly: the error being raised is what matters), the
        # state written removed, the lock file and the directories this restore created too.
        if self.materializer is not None:
            with contextlib.suppress(Exception):
                self.materializer.close()
        try:
            if session is not None and session.fresh and not self.database_existed:
                session.abandon()
        finally:
            if session is not None:
                session.directory.close(remove_lock=not self.lock_existed)
                session.__exit__(None, None, None)
            for directory in self.created:
                with contextlib.suppress(OSError):
                    directory.rmdir()  # only if empty: never what someone else put there
