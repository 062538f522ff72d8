"""Exit codes of the command line, the error type that carries one, and which failures are
transient (:func:`transient_failure`: retried from the checkpoint, else exit 75).

Every command reports a :class:`CliError` (or a refused state directory,
:class:`~upsertmat.impls.persistence.errors.StateDirError`) as one line ``upsertmat COMMAND: MESSAGE`` on
stderr and exits with the error's code. The codes are part of the CLI's contract
(``docs/cli.md``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Final

from .impls.persistence.errors import StateDirError, StateDirIOError, StateDirWriteError, UnsupportedStateDir

__all__ = [
    "CliError",
    "ExitCode",
    "StateDirError",
    "StateDirIOError",
    "StateDirWriteError",
    "UnsupportedStateDir",
    "concurrent_writer",
    "exit_code_of",
    "transient_failure",
]


class ExitCode(enum.IntEnum):
    """Process exit codes of ``upsertmat``."""

    OK = 0
    BAD_INPUT = 1
    """A bad input line with ``--on-error fail``; state saved up to the line before it."""
    USAGE = 2
    """Bad flags, unknown configuration key, malformed or unsupported value, unopenable file."""
    STATE_DIR = 3
    """``--state-dir`` is locked, does not match this run, or holds a damaged manifest/snapshot;
    for ``run``: another run writes the same checkpoint."""
    IO = 4
    """Reading or writing a file failed (the input, the output, the dead-letter file, the state,
    a savepoint): a full disk or a device error. Free space (or fix the device) and run again."""
    INTERNAL = 70
    """A bug: an implementation raised; nothing of this run is saved."""
    TRANSIENT = 75
    """A transient resource failure (sysexits' EX_TEMPFAIL): Spark's Python worker did not connect
    back in time on a loaded machine. Every committed batch is kept: run the same command again."""
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


TRANSIENT_SIGNS: Final = (
    "Python worker failed to connect back",  # PythonWorkerFactory.createSimpleWorker: 10 s
    "Timed out while waiting for the Python worker to connect back",  # ... and through the daemon: 60 s
)
"""What Spark's text says when a Python worker did not connect back to the JVM in time: both
waits are fixed in PySpark 4 (``PythonWorkerFactory``; no configuration key lengthens them)."""

TRANSIENT_REASON: Final = (
    "Spark's Python worker did not connect back to the JVM in time (Spark waits a fixed 10 s for "
    "a new worker, 60 s through its daemon, and has no setting to lengthen that): the machine was "
    "too loaded"
)

CONCURRENT_SIGNS: Final = ("CONCURRENT_STREAM_LOG_UPDATE", "Multiple streaming jobs detected")
"""What Spark's text says when it finds that another query wrote the checkpoint's log entry it
was about to write (two runs of one job at once)."""


def _texts(error: BaseException) -> Iterator[str]:
    """The text of ``error`` and of every error it wraps (``__cause__``, ``__context__``), once each."""
    seen: set[int] = set()
    found: BaseException | None = error
    while found is not None and id(found) not in seen:
        seen.add(id(found))
        yield str(found)
        found = found.__cause__ or found.__context__


def concurrent_writer(error: BaseException) -> bool:
    """True when ``error`` (or what it wraps) is Spark stopping a query because another one writes
    the same checkpoint. O(length of the error's text)."""
    for text in _texts(error):
        if any(sign in text for sign in CONCURRENT_SIGNS):
            return True
        if "FileAlreadyExistsException" in text and "metadata" in text:  # both creating a new checkpoint
            return True
    return False


RETRY_WAITS: Final = (5.0, 15.0, 30.0)
"""Seconds before each retry of a transient failure from the checkpoint (the gateway's jobs and
``upsertmat run --follow``): three retries, then the failure is reported."""


def transient_failure(error: BaseException) -> str | None:
    """One line naming the transient resource failure ``error`` reports (in its own text or in
    what it wraps), or None for any other error. The one classification the embedded runs and
    the gateway's jobs share. O(length of the error's text)."""
    for text in _texts(error):
        if any(sign in text for sign in TRANSIENT_SIGNS):
            return TRANSIENT_REASON
    return None
