"""Crash recovery of ``replay --state-dir``: where a run is, committed with the state.

Byte backends (rocksdb, lmdb) commit state per input. To make the run's position atomic with
that state, ``replay`` holds the backend's commit (``defer_commits``) while an input line is
applied and its output written and flushed, then writes a :class:`Position` into the value
state ``upsertmat.replay`` and commits once: the state change of line ``n`` and "``n + 1``
lines consumed, output file ``B`` bytes long" become durable together. After a SIGKILL the
last committed position says exactly how far the state got and how long the output was at
that instant; a restarted run skips that many input lines and truncates the output to ``B``.

Heap state has no per-input commit; ``replay`` checkpoints it every ``--checkpoint-every``
lines (snapshot + manifest with the same position) instead. See docs/operations.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO, Any, Protocol

from .errors import StateDirError
from .impls.state import StateBackend, ValueState
from .spec import Materializer

RECORD_STATE = "upsertmat.replay"
RECORD_KEY = b"position"


@dataclass(frozen=True)
class Position:
    """How far a run got: stream lines consumed, the clock, rule-7 misses, output length."""

    lines: int
    now: int
    misses: int
    output_bytes: int | None


class _Deferrable(Protocol):
    defer_commits: bool


def _valid(value: Any) -> bool:
    if not (isinstance(value, list) and len(value) == 4):
        return False
    ints = value[:3] + ([] if value[3] is None else [value[3]])
    return all(isinstance(item, int) and not isinstance(item, bool) and item >= 0 for item in ints)


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

    def read(self) -> Position | None:
        """The last committed position, or None if none was ever written."""
        value = self._state.get(RECORD_KEY)
        if value is None:
            return None
        if not _valid(value):
            raise StateDirError(
                f"damaged replay position record in the {self._backend.name} state: {value!r}"
            )
        return Position(value[0], value[1], value[2], value[3])

    def hold(self) -> None:
        """From now until :meth:`commit`, the implementation's commits are deferred."""
        backend: _Deferrable = self._backend  # type: ignore[assignment]
        backend.defer_commits = True

    def commit(self, position: Position) -> None:
        """Write ``position`` and commit it with every write held since :meth:`hold`."""
        self._state.put(RECORD_KEY, [position.lines, position.now, position.misses, position.output_bytes])
        backend: _Deferrable = self._backend  # type: ignore[assignment]
        backend.defer_commits = False
        self._backend.commit()


def skip_lines(source: IO[bytes], count: int) -> int:
    """Read and drop ``count`` lines of ``source``; return how many there were (may be fewer)."""
    skipped = 0
    while skipped < count and source.readline():
        skipped += 1
    return skipped


def reopen_output(path: str, length: int) -> IO[bytes]:
    """The output file of a killed run, truncated to ``length`` bytes and positioned at its end.

    StateDirError if it is missing or shorter: it is then not the killed run's output.
    """
    try:
        stream = open(path, "r+b")  # noqa: SIM115 - returned to the caller
    except FileNotFoundError:
        if length == 0:
            return open(path, "wb")
        raise StateDirError(
            f"cannot resume: output {path} is missing but the checkpoint says {length} bytes "
            "were written to it; "
            "resume with the killed run's -o FILE"
        ) from None
    except OSError as error:
        raise StateDirError(f"cannot reopen output {path}: {error.strerror}") from None
    size = stream.seek(0, 2)
    if size < length:
        stream.close()
        raise StateDirError(
            f"cannot resume: output {path} has {size} bytes but the checkpoint says {length} were written; "
            "it is not the killed run's output"
        )
    stream.truncate(length)
    stream.seek(length)
    return stream
