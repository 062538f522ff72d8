"""The input side of a run on a state directory: what of an input has been applied.

A run's position names its input by the bytes the run has *applied*: how many, and their
SHA-256. :class:`AppliedInput` reads an input line by line and counts a line only when the
caller says it was applied (:meth:`AppliedInput.applied`), so a line that stops the run — a
bad line with ``--on-error fail``, an ``ON CONFLICT DO ERROR`` conflict at a watermark, a
signal that arrives after it was read — is never part of the position, and the same command
again starts with that line. :func:`match_runs` tells a rerun of a finished run's input from a
continuation. The decisions built on them (resume, rerun, new run) are
:meth:`upsertmat.impls.persistence.session.StateSession.open_input`'s.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from typing import IO

from ..documents import RunRecord

EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


class AppliedInput:
    """The lines of a run's input, with the count and SHA-256 of the bytes applied so far.

    Iterating reads the next line (``readline``) and counts nothing; :meth:`applied` counts
    it. ``bytes`` and :meth:`digest` cover every byte of this input applied, by this process
    or (skipped with :meth:`skip`/:meth:`skip_lines`) by an earlier one; ``lines`` counts
    the lines this process applied after the skip. O(length of a line) per line.
    """

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self._hasher = hashlib.sha256()
        self.bytes = 0
        self.lines = 0

    def __iter__(self) -> AppliedInput:
        return self

    def __next__(self) -> bytes:
        line = self._source.readline()
        if not line:
            raise StopIteration
        return line

    def applied(self, line: bytes) -> None:
        """Count ``line`` (the last one read) as applied: from now on a position includes it."""
        self._hasher.update(line)
        self.bytes += len(line)
        self.lines += 1

    def digest(self) -> str:
        """SHA-256 (hex) of every byte applied so far. O(1)."""
        return self._hasher.copy().hexdigest()

    def skip(self, count: int) -> bool:
        """Consume exactly ``count`` bytes in whole lines (applied by an earlier process);
        False if the input ends first or a line crosses ``count`` (then it is not the input
        those bytes were applied from)."""
        line = b"\n"
        while self.bytes < count:
            line = self._source.readline(count - self.bytes)
            if not line:
                return False
            self._hasher.update(line)
            self.bytes += len(line)
        # A last piece without a newline is a whole line only at the end of the input.
        return line.endswith(b"\n") or not self._source.read(1)

    def skip_lines(self, count: int) -> int:
        """Consume up to ``count`` lines applied by an earlier process; return how many there were."""
        skipped = 0
        while skipped < count:
            line = self._source.readline()
            if not line:
                break
            self._hasher.update(line)
            self.bytes += len(line)
            skipped += 1
        return skipped


def is_regular(source: IO[bytes]) -> bool:
    """True if ``source`` is a regular file (it can be read twice: stdin and pipes cannot)."""
    try:
        return stat.S_ISREG(os.fstat(source.fileno()).st_mode)
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def match_runs(source: IO[bytes], runs: tuple[RunRecord, ...]) -> tuple[str, RunRecord] | None:
    """``("rerun", run)`` if ``source`` holds exactly the input of a completed run; ``("grown",
    last run)`` if it begins with the last run's whole input (whole lines) and has more; or None.

    Reads the regular file ``source`` once, only when some run's input length allows a match;
    O(file size). ``source`` is left where it was.
    """
    if not runs:
        return None
    size = os.fstat(source.fileno()).st_size
    if size == 0:  # an empty input changes nothing: running it is as good as skipping it
        return None
    last = runs[-1]
    same_size = any(run.input_bytes == size for run in runs)
    grown = 0 < last.input_bytes < size
    if not (same_size or grown):
        return None
    start = source.tell()
    hasher = hashlib.sha256()
    prefix: str | None = None
    prefix_ends_line = False
    done = 0
    while True:
        want = 1 << 20
        if grown and prefix is None:
            want = min(want, last.input_bytes - done)
        block = source.read(want)
        if not block:
            break
        hasher.update(block)
        done += len(block)
        if grown and prefix is None and done == last.input_bytes:
            prefix = hasher.hexdigest()
            prefix_ends_line = block.endswith(b"\n")
    source.seek(start)
    whole = hasher.hexdigest()
    for run in reversed(runs):
        if run.input_bytes == size and run.input_sha256 == whole:
            return "rerun", run
    if prefix is not None and prefix == last.input_sha256 and prefix_ends_line:
        return "grown", last
    return None
