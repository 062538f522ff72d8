"""Exit codes of the command line and the error type that carries one.

Every command reports a :class:`CliError` as one line ``upsertmat COMMAND: MESSAGE`` on
stderr and exits with the error's code. The codes are part of the CLI's contract
(``docs/cli.md``).
"""

from __future__ import annotations

import enum


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
    """Reading the input or writing the output or dead-letter file failed mid-run."""
    INTERNAL = 70
    """A bug: an implementation raised; nothing of this run is saved."""
    INTERRUPTED = 130
    """SIGINT (SIGTERM gives 143); state saved up to the last fully processed line."""


class CliError(Exception):
    """An error the command line reports in one line and turns into an exit code."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


class StateDirError(CliError):
    """A problem with ``--state-dir``: locked, mismatched, damaged or unusable."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.STATE_DIR)


class StateDirWriteError(CliError):
    """Writing a file of ``--state-dir`` failed (a full disk, an I/O error): exit code 4."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.IO)
