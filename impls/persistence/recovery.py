"""Crash recovery of ``replay --state-dir``: where a run is, committed together with the state.

A run's **position** says how far it got: the stream lines consumed, the clock, the rule-7
misses, the length of its ``-o`` file and of the dead-letter file, and how many bytes of its
input it consumed together with their SHA-256. It is committed atomically with the state:

- Byte backends (rocksdb, lmdb) keep it in the value state ``upsertmat.replay`` of their own
  database. ``replay`` holds the backend's commits (``defer_commits``: the commit-interval
  mechanism of ``upsertmat.impls.state.deferred`` with the owner choosing the commit points)
  between two commit points, flushes the output, writes the position and commits once
  (``checkpoint``), so "the state after line ``n``" and "``n`` lines consumed, output ``B``
  bytes long" become durable together. The record of a run that finished carries ``done``.
- Heap state is saved as a snapshot with a manifest holding the same position
  (:mod:`.statedir`): at ``--checkpoint-every`` lines and when the run stops.

After a SIGKILL the last committed position tells a restarted run exactly where to go on: it
checks that its input begins with the consumed bytes (same SHA-256), skips them, truncates the
output and dead-letter files to their committed lengths and continues. See docs/operations.md.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal, Protocol

from ...spec import Materializer
from ..documents import is_natural
from ..state import StateBackend, ValueState
from .errors import StateDirError
from .statedir import RunRecord

RECORD_STATE = "upsertmat.replay"
RECORD_KEY = b"position"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class Position:
    """How far run ``run_id`` got; see the module docstring."""

    run_id: int
    lines: int
    now: int
    misses: int
    output_bytes: int | None
    input_bytes: int
    input_sha256: str
    dead_letter_bytes: int | None
    done: bool
    state_id: str | None

    def to_record(self) -> list[Any]:
        """The stored form (a msgpack array)."""
        return [
            self.run_id, self.lines, self.now, self.misses, self.output_bytes, self.input_bytes,
            self.input_sha256, self.dead_letter_bytes, self.done, self.state_id,
        ]  # fmt: skip

    @classmethod
    def from_record(cls, value: Any) -> Position | None:
        """The position of a stored record, or None if it is not one."""
        if not (isinstance(value, list) and len(value) == 10):
            return None
        run_id, lines, now, misses, output_bytes, input_bytes, sha, dead, done, state_id = value
        counts = [run_id, lines, now, misses, input_bytes]
        optional = [item for item in (output_bytes, dead) if item is not None]
        if not all(is_natural(item) for item in counts + optional):
            return None
        if not (isinstance(sha, str) and isinstance(done, bool)):
            return None
        if state_id is not None and not isinstance(state_id, str):
            return None
        return cls(run_id, lines, now, misses, output_bytes, input_bytes, sha, dead, done, state_id)


class _Deferrable(Protocol):
    defer_commits: bool


class PositionRecord:
    """The position record inside a byte backend; see the module docstring."""

    def __init__(self, backend: StateBackend) -> None:
        self._backend = backend
        self._state: ValueState = backend.value_state(RECORD_STATE)

    @classmethod
    def attach(cls, materializer: Materializer) -> PositionRecord | None:
        """The record of ``materializer``'s backend, or None if it cannot defer its commits.

        Built-in implementations expose their backend as ``backend``; heap backends (no
        durable commits) and third-party implementations get None.
        """
        backend = getattr(materializer, "backend", None)
        if backend is None or not hasattr(backend, "defer_commits"):
            return None
        record: PositionRecord = cls(backend)
        return record

    def read(self) -> Position | Literal["legacy"] | None:
        """The last committed position; None if none was ever written; ``"legacy"`` for the
        4-field record of upsertmat versions before reruns were recognised. One read.

        StateDirError for a damaged record.
        """
        value = self._state.get(RECORD_KEY)
        if value is None:
            return None
        if isinstance(value, list) and len(value) == 4:
            return "legacy"
        position = Position.from_record(value)
        if position is None:
            raise StateDirError(
                f"damaged replay position record in the {self._backend.name} state: {value!r}"
            )
        return position

    def hold(self) -> None:
        """From now until :meth:`commit`, the implementation's commits are deferred."""
        backend: _Deferrable = self._backend  # type: ignore[assignment]
        backend.defer_commits = True

    def commit(self, position: Position) -> None:
        """Write ``position`` and commit it with every write held since :meth:`hold`."""
        self._state.put(RECORD_KEY, position.to_record())
        backend: _Deferrable = self._backend  # type: ignore[assignment]
        backend.defer_commits = False
        self._backend.checkpoint()


class ConsumedInput:
    """The input of a run: its lines, with the count and SHA-256 of the bytes consumed so far."""

    def __init__(self, source: IO[bytes]) -> None:
        self._source = source
        self._hasher = hashlib.sha256()
        self.bytes = 0

    def __iter__(self) -> ConsumedInput:
        return self

    def __next__(self) -> bytes:
        line = self._source.readline()
        if not line:
            raise StopIteration
        self._hasher.update(line)
        self.bytes += len(line)
        return line

    def digest(self) -> str:
        """SHA-256 (hex) of every byte consumed so far. O(1)."""
        return self._hasher.copy().hexdigest()

    def skip(self, count: int) -> bool:
        """Consume exactly ``count`` bytes in whole lines; False if the input ends or a line
        crosses ``count`` (then it is not the input those bytes were consumed from)."""
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
        """Consume up to ``count`` lines; return how many there were."""
        skipped = 0
        while skipped < count and next(self, None) is not None:
            skipped += 1
        return skipped


def reopen_truncated(path: str, length: int, what: str) -> IO[bytes]:
    """The file ``path`` of a killed run, truncated to ``length`` bytes and positioned at its end.

    StateDirError if it is shorter: it is then not the killed run's file.
    """
    try:
        stream = open(path, "r+b")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        if length == 0:
            return open(path, "wb")
        raise StateDirError(
            f"cannot resume: {what} {path} is missing but the checkpoint says {length} bytes "
            f"were written to it; resume with the killed run's {what}"
        ) from None
    except OSError as error:
        raise StateDirError(f"cannot reopen {what} {path}: {error.strerror}") from None
    size = stream.seek(0, 2)
    if size < length:
        stream.close()
        raise StateDirError(
            f"cannot resume: {what} {path} has {size} bytes but the checkpoint says {length} were "
            f"written; it is not the killed run's {what}"
        )
    stream.truncate(length)
    stream.seek(length)
    return stream


def is_regular(source: IO[bytes]) -> bool:
    """True if ``source`` is a regular file (it can be read twice: stdin and pipes cannot)."""
    try:
        return stat.S_ISREG(os.fstat(source.fileno()).st_mode)
    except (OSError, ValueError, io.UnsupportedOperation):
        return False


def size_or_none(path: Path) -> int | None:
    """The size of ``path``, or None if it does not exist (or cannot be read)."""
    try:
        return path.stat().st_size
    except OSError:
        return None


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
