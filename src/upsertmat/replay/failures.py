"""What a failure of a running replay means, said in one line with its exit code (docs/cli.md).

The exit codes: 3 for state that is refused or found damaged, 4 for an I/O failure (a full
disk, a device error) of the input, the output, the dead-letter file or the state. After
either, the state directory is at its last commit and the same command again goes on from
there; the message says what to do.
"""

from __future__ import annotations

import errno

from upsertmat.errors import CliError, ExitCode, StateDirError
from upsertmat.impls.persistence.session import StateSession
from upsertmat.impls.persistence.statedir import is_json_value
from upsertmat.impls.settings import Settings
from upsertmat.impls.state.errors import CorruptStateError, StateError, StorageError
from upsertmat.spec import Materializer

from .messages import say

_DEVICE_ERRORS = frozenset({errno.ENOSPC, errno.EIO, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.ENXIO})


def io_exit_code(error: OSError) -> ExitCode:
    """4 (I/O) for a failure of the device or the space on it, 2 (usage) for a path that cannot
    be used (missing, a directory, no permission): what opening a named file can meet."""
    return ExitCode.IO if error.errno in _DEVICE_ERRORS else ExitCode.USAGE


def state_failure(error: StateError, session: StateSession | None) -> CliError | StateDirError:
    """A state error of a running run, with what it means and what to do (docs/operations.md)."""
    at = f"the state directory {session.path} is at its last commit" if session else "nothing was saved"
    if isinstance(error, CorruptStateError):
        return StateDirError(
            f"{error}; {at}. Restore the directory from a copy, or a savepoint into a new --state-dir"
        )
    if isinstance(error, StorageError):
        return CliError(
            f"{error}; {at}: free space (or fix the device) and run the same command again to go on",
            ExitCode.IO,
        )
    return StateDirError(f"{error}; {at}")


def damage_behind(materializer: Materializer, settings: Settings) -> CorruptStateError | None:
    """After an implementation raised on state read from a database: is the stored state
    damaged (a value of the wrong shape, a broken link) rather than the code wrong? Runs the
    layout's own ``_check()`` over the committed state (a full scan, only after a failure).
    None: the state looks sound (a bug)."""
    check = getattr(materializer, "_check", None)
    if check is None:
        return None
    try:
        check()
        # A well-shaped layout may still hold a value JSON cannot carry (a msgpack timestamp
        # extension inside a row): the stored rows must be JSON values.
        export = getattr(materializer, "export_elements", None)
        for context, elements in export() if export is not None else ():
            for row, _ in elements:
                if not all(is_json_value(value) for value in row):
                    raise ValueError(f"a row of key {context!r} holds a value JSON cannot carry")
    except Exception as error:  # a LayoutError, or the check itself tripping over a bad value
        return CorruptStateError(
            f"damaged state: the {settings.backend.value} state does not hold a valid "
            f"{settings.strategy.value} layout ({type(error).__name__}: {error})"
        )
    return None


def close_materializer(materializer: Materializer, failing: BaseException | None = None) -> None:
    """Close the state; a storage error now cannot lose what was committed: a warning — unless
    the run is ``failing`` already (a full disk at a commit makes closing fail the same way):
    then the error being raised is the one line said."""
    try:
        materializer.close()
    except StateError as error:
        if failing is None:
            say(f"warning: closing the state failed ({error}); everything committed is safe")
