"""Exit codes of the command line and the error type that carries one.

Every command reports a :class:`CliError` (or a refused state directory,
:class:`~upsertmat.impls.persistence.errors.StateDirError`) as one line ``upsertmat COMMAND: MESSAGE`` on
stderr and exits with the error's code. The codes are part of the CLI's contract
(``docs/cli.md``).
"""

from __future__ import annotations

import enum

from .impls.persistence.errors import StateDirError, StateDirIOError, StateDirWriteError, UnsupportedStateDir

__all__ = [
    "CliError",
    "ExitCode",
    "StateDirError",
    "StateDirIOError",
    "StateDirWriteError",
    "UnsupportedStateDir",
    "exit_code_of",
]


class ExitCode(enum.IntEnum):
    """Process exit codes of ``upsertmat``."""

    OK = 0
    BAD_INPUT = 1
    """A bad input line with ``--on-error fail``; state saved up to the line before it."""
    USAGE = 2
    """Bad flags, unknown configuration key, malformed or unsupported value, unopenable file."""
    STATE_DIR = 3
    """``--state-dir`` is locked, does not match this run, or holds a damaged manifest/snapshot."""
    IO = 4
    """Reading or writing a file failed (the input, the output, the dead-letter file, the state,
    a savepoint): a full disk or a device error. Free space (or fix the device) and run again."""
    INTERNAL = 70
    """A bug: an implementation raised; nothing of this run is saved."""
    INTERRUPTED = 130
    """SIGINT (SIGTERM gives 143); state saved up to the last fully processed line."""
    CLOSED_PIPE = 141
    """stdout's reader went away (``upsertmat ... | head``): quiet, as Unix tools exit on SIGPIPE."""


class CliError(Exception):
    """An error the command line reports in one line and turns into an exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


def exit_code_of(error: StateDirError) -> ExitCode:
    """The exit code of a refused state directory: 4 for a failed read or write of its file
    system, 2 for an implementation that cannot use one, 3 otherwise."""
    if isinstance(error, StateDirIOError):
        return ExitCode.IO
    if isinstance(error, UnsupportedStateDir):
        return ExitCode.USAGE
    return ExitCode.STATE_DIR
