"""The output side of ``upsertmat replay``: emitted changes and dead letters.

:class:`Output` is ``-o FILE`` or stdout, :class:`DeadLetters` the file bad lines go to with
``--on-error skip``. Both know their length, which a commit point records with the position,
and a resumed run truncates each back to its committed length, so what the killed run wrote
after its last commit is written once more, not twice. Every failure is said in one line
naming the file (:class:`~upsertmat.errors.CliError`, exit 4; the state directory is then at
its last commit); a reader of stdout that went away is :class:`ReaderGone` (exit 141, quiet).
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path
from typing import IO

from upsertmat.errors import CliError, ExitCode, StateDirError
from upsertmat.stdout import cut_short, silence

from .failures import io_exit_code
from .jsonl import format_dead_letter

AFTER_FAILURE = (
    "the state directory (if any) is left at its last commit: free the space (or fix the device) and "
    "run the same command again to go on from there"
)


class ReaderGone(Exception):
    """stdout's reader closed the pipe (``replay ... | head``)."""


class Output:
    """Where emitted changes go. ``length``: bytes written to ``-o FILE`` (None for stdout,
    which cannot be truncated). ``flush_each``: flush every change as it is written (so a
    consumer of a pipe sees it at once); otherwise at commit points and at the end."""

    def __init__(self, name: str, stream: IO[bytes], length: int | None, flush_each: bool) -> None:
        self.name = name
        self.is_stdout = name == "-"
        self.length = length
        self._stream = stream
        self._write = stream.write
        self._flush_each = flush_each

    @classmethod
    def open(
        cls, name: str, *, flush_each: bool, resumed: bool = False, committed: int | None = None
    ) -> Output:
        """``name`` (``-``: stdout) opened for a run: truncated to ``committed`` bytes when a
        resumed run's committed length is known, else created empty."""
        if name == "-":
            sys.stdout.flush()
            return cls(name, sys.stdout.buffer, None, flush_each)
        if resumed and committed is not None:
            return cls(name, reopen_truncated(Path(name), committed, "output"), committed, flush_each)
        try:
            stream = open(name, "wb")  # noqa: SIM115 - closed by close()
        except OSError as error:
            raise CliError(
                f"cannot open output {name}: {error.strerror or error}", io_exit_code(error)
            ) from None
        return cls(name, stream, 0, flush_each)

    def write(self, data: bytes) -> None:
        """Write one emitted change's line."""
        try:
            self._write(data)
            if self._flush_each:
                self._stream.flush()
        except OSError as error:
            raise self._failed(error) from None
        if self.length is not None:
            self.length += len(data)

    def flush(self) -> None:
        """Hand everything written to the operating system (before a commit point records it)."""
        try:
            self._stream.flush()
        except OSError as error:
            raise self._failed(error) from None

    def _failed(self, error: OSError) -> Exception:
        if self.is_stdout and isinstance(error, BrokenPipeError):
            return ReaderGone()
        target = "stdout" if self.is_stdout else self.name
        return CliError(
            f"cannot write output {target}: {error.strerror or error}; {AFTER_FAILURE}", ExitCode.IO
        )

    def reader_gone(self) -> bool:
        """True if stdout is a pipe whose reader has closed it with output still unread in the
        pipe: the run must not claim success (exit 141, as for a write that failed).
        :func:`upsertmat.stdout.cut_short` (waits a moment for a reader still there)."""
        if not self.is_stdout:
            return False
        try:
            descriptor = self._stream.fileno()
        except (OSError, ValueError, io.UnsupportedOperation):
            return False
        return cut_short(descriptor)

    def close(self) -> None:
        """Close ``-o FILE`` (flush stdout); errors were reported already.

        Every change was flushed at the last commit point (or as written), so a failure here
        can only repeat one the run reported, or lose changes after the last commit, which
        the same command writes again. A broken stdout is pointed at /dev/null so the
        interpreter's final flush stays quiet.
        """
        try:
            if self.is_stdout:
                self._stream.flush()
            else:
                self._stream.close()
        except OSError:
            if self.is_stdout:
                silence()


class DeadLetters:
    """The dead-letter file of ``--on-error skip``: appended to, created at the first bad line.

    ``length``: its size (None while it does not exist), kept up to date as records are
    written. ``flush_each``: flush every record (else at commit points and at the end).
    """

    def __init__(self, path: Path, *, flush_each: bool) -> None:
        self.path = path
        self.count = 0
        self.length: int | None = None
        self._stream: IO[bytes] | None = None
        self._flush_each = flush_each

    def measure(self) -> None:
        """A new run: the file's length now is where a resume of this run truncates it to."""
        try:
            self.length = self.path.stat().st_size
        except FileNotFoundError:
            self.length = None
        except OSError as error:
            raise self._failed(error) from None

    def resume(self, committed: int | None) -> None:
        """A resumed run: cut what the stopped run wrote after its last commit point."""
        self.length = committed
        try:
            os.truncate(self.path, committed or 0)
        except FileNotFoundError:
            return
        except OSError as error:
            raise CliError(
                f"cannot truncate dead-letter file {self.path}: {error.strerror or error}", ExitCode.IO
            ) from None

    def write(self, number: int, index: int, error: str, raw: bytes) -> None:
        """Append the record of the bad line ``raw`` (line ``number``, stream index ``index``)."""
        data = format_dead_letter(number, index, error, raw).encode("utf-8")
        try:
            if self._stream is None:
                self._stream = open(self.path, "ab")  # noqa: SIM115 - closed by close()
            self._stream.write(data)
            if self._flush_each:
                self._stream.flush()
        except OSError as failure:
            raise self._failed(failure) from None
        self.count += 1
        self.length = (self.length or 0) + len(data)

    def flush(self) -> None:
        """Hand every record written to the operating system (before a commit point records it)."""
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except OSError as error:
            raise self._failed(error) from None

    def _failed(self, error: OSError) -> CliError:
        return CliError(
            f"cannot write dead-letter file {self.path}: {error.strerror or error}; {AFTER_FAILURE}",
            ExitCode.IO,
        )

    def close(self) -> None:
        """Close the file if it was opened. Records not flushed by then belong to lines after
        the last commit point, which the same command processes again: a failure is ignored."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            with contextlib.suppress(OSError):
                stream.close()


def reopen_truncated(path: Path, length: int, what: str) -> IO[bytes]:
    """The file ``path`` of a stopped run, truncated to ``length`` bytes and positioned at its end.

    StateDirError if it is missing (unless ``length`` is 0) or shorter: it is then not the
    stopped run's file; CliError if it cannot be opened.
    """
    try:
        try:
            stream = open(path, "r+b")  # noqa: SIM115 - returned to the caller
        except FileNotFoundError:
            if length:
                raise StateDirError(
                    f"cannot resume: {what} {path} is missing but the checkpoint says {length} bytes "
                    f"were written to it; resume with the killed run's {what}"
                ) from None
            return open(path, "wb")
    except OSError as error:
        raise CliError(
            f"cannot reopen {what} {path}: {error.strerror or error}", io_exit_code(error)
        ) from None
    try:
        size = stream.seek(0, 2)
        if size < length:
            raise StateDirError(
                f"cannot resume: {what} {path} has {size} bytes but the checkpoint says {length} were "
                f"written; it is not the killed run's {what}"
            )
        stream.truncate(length)
        stream.seek(length)
    except OSError as error:
        stream.close()
        raise CliError(f"cannot truncate {what} {path}: {error.strerror or error}", ExitCode.IO) from None
    except BaseException:
        stream.close()
        raise
    return stream
