"""Crash recovery of ``replay --state-dir``: where a run is, committed together with the state.

A run's **position** says how far it got: the stream lines applied, the clock, the rule-7
misses, the length of its ``-o`` file, of the dead-letter file and of the ``--misses`` file,
and how many bytes of its input it applied together with their SHA-256 (a line that stopped
the run is not among them). It is committed atomically with the state:

- Byte backends (rocksdb, lmdb) keep it in the value state ``upsertmat.replay`` of their own
  database. ``replay`` holds the backend's commits (``defer_commits``: the commit-interval
  mechanism of ``upsertmat.impls.state.deferred`` with the owner choosing the commit points)
  between two commit points, flushes the output, writes the position and commits once
  (``checkpoint``), so "the state after line ``n``" and "``n`` lines applied, output ``B``
  bytes long" become durable together. The record of a run that finished carries ``done``.
- Heap state is saved as a snapshot with a manifest holding the same position
  (:mod:`.statedir`): at ``--checkpoint-every`` lines and when the run stops.

After a SIGKILL the last committed position tells a restarted run exactly where to go on: it
checks that its input begins with the applied bytes (same SHA-256), skips them, truncates the
output and dead-letter files to their committed lengths and continues
(:meth:`~.session.StateSession.open_input`, :mod:`.inputs`). See docs/operations.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ...spec import Materializer
from ..documents import is_natural
from ..state import StateBackend, ValueState
from ..state.errors import storage_failure
from .errors import StateDirError

RECORD_STATE = "upsertmat.replay"
RECORD_KEY = b"position"


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
    misses_bytes: int | None = None
    """Length of the ``--misses`` file (None: the run writes none)."""

    def to_record(self) -> list[Any]:
        """The stored form (a msgpack array; the 11th field only with a misses file, so a run
        without one stays readable by upsertmat versions before it)."""
        record = [
            self.run_id, self.lines, self.now, self.misses, self.output_bytes, self.input_bytes,
            self.input_sha256, self.dead_letter_bytes, self.done, self.state_id,
        ]  # fmt: skip
        return record if self.misses_bytes is None else [*record, self.misses_bytes]

    @classmethod
    def from_record(cls, value: Any) -> Position | None:
        """The position of a stored record (of 11 fields; 10 before the misses file was
        recorded), or None if it is not one."""
        if not (isinstance(value, list) and len(value) in (10, 11)):
            return None
        run_id, lines, now, misses, output_bytes, input_bytes, sha, dead, done, state_id = value[:10]
        misses_bytes = value[10] if len(value) == 11 else None
        counts = [run_id, lines, now, misses, input_bytes]
        optional = [item for item in (output_bytes, dead, misses_bytes) if item is not None]
        if not all(is_natural(item) for item in counts + optional):
            return None
        if not (isinstance(sha, str) and isinstance(done, bool)):
            return None
        if state_id is not None and not isinstance(state_id, str):
            return None
        return cls(
            run_id, lines, now, misses, output_bytes, input_bytes, sha, dead, done, state_id, misses_bytes
        )


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
        try:
            value = self._state.get(RECORD_KEY)
        except Exception as error:  # the engine's own error (a damaged block), classified
            failure = storage_failure(self._backend, error)
            if failure is None:
                raise
            raise failure from error
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
