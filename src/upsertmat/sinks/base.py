"""The interface every sink of the pipeline implements: :class:`BatchSink`.

A sink commits the pipeline's micro-batches, each **exactly once**: Spark re-runs a micro-batch
after a restart only if its commit did not reach the checkpoint, and it re-runs it with the same
id and the same input, so a sink that records the batch id atomically with the batch's data and
skips a batch id it already holds applies every batch once (docs/spark.md, *Exactly once*).

:meth:`BatchSink.apply_batch` is a template method: it reduces the batch to its net changes
(:func:`last_per_key`), opens the sink's transaction, skips a batch already committed, skips an
empty batch where the sink records nothing for one, lets the sink write and commit, and turns the
sink library's errors into one :class:`SinkFailure` naming the sink and the batch. A sink supplies
only :meth:`~BatchSink._begin`, :meth:`~BatchSink._committed` and :meth:`~BatchSink._write` (and
the readers :meth:`~BatchSink.rows`, :meth:`~BatchSink.committed_batches`). No pyspark import.

**Written where the rows are.** A sink whose format lets many writers stage one commit (Paimon:
data files from any process, made visible by ONE snapshot) also offers :meth:`BatchSink.task_writer`:
a picklable :class:`TaskWriter` that the pipeline runs in every Spark task over that task's part
of the batch (each key in one task), returning the encoded metadata of what it staged (Paimon's
commit messages); the driver then commits those once with :meth:`BatchSink.commit_written`, the
same template as :meth:`~BatchSink.apply_batch` (replay check, kill points, one atomic commit,
error wrapping) without any row passing through it. A retried or speculative task attempt's
staged files are referenced by no message the driver receives: only the commit makes data visible.
"""

from __future__ import annotations

import os
import signal
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

from ..spec.changes import Row

KILL_POINT_VARIABLE = "UPSERTMAT_SINK_KILL_POINT"
"""``POINT:BATCH`` (``before-commit:3``): the process SIGKILLs itself at that point of that batch's
commit. A test hook for the exactly-once campaigns (tests/spark/test_sink_kill_points.py); unset in
every real run. ``before-commit``: the batch is written but not committed (an open SQL
transaction, Delta/Iceberg/Paimon data files without their log entry / metadata swap / snapshot);
``after-commit``: committed, not yet reported to Spark."""
KILL_POINTS = ("before-commit", "after-commit")
TASK_FAILURE_VARIABLE = "UPSERTMAT_SINK_TASK_FAILURE"
"""``BATCH:PARTITION`` (``1:0``): the first attempt of that Spark task of that batch fails after
its :class:`TaskWriter` has staged its files (the pipeline's executor write reads it). A test hook
for task retries (tests/spark/test_executor_write.py); unset in every real run."""


class SinkError(RuntimeError):
    """The sink cannot be opened or written (bad URL, unsupported column type, SQL error)."""


class SinkFailure(SinkError):
    """The sink failed while a micro-batch was written: nothing of it is applied (see
    :meth:`BatchSink.apply_batch`)."""


@dataclass(frozen=True)
class Column:
    """A sink column: its name and Spark simple type name (``bigint``, ``double``, ``string``...)."""

    name: str
    spark_type: str


@dataclass(frozen=True)
class BatchOutcome:
    """What :meth:`BatchSink.apply_batch` did: rows upserted and keys deleted, or ``skipped``
    (the batch id was already committed)."""

    upserts: int
    deletes: int
    skipped: bool


@dataclass(frozen=True)
class NetBatch:
    """One micro-batch reduced to what a sink writes: per primary key its last change
    (``upserts``: rows; ``deletes``: primary-key tuples), with the batch's identity, the number
    of changes it had and its explained misses (``(arrival, explanation JSON)``)."""

    query_id: str
    batch_id: int
    changes: int
    upserts: list[Row]
    deletes: list[Row]
    misses: Sequence[tuple[int, str]] = ()

    @property
    def empty(self) -> bool:
        """True when the batch changes no key (it may still hold misses)."""
        return not self.upserts and not self.deletes


def last_per_key(changes: Sequence[tuple[str, Row]], pk: Sequence[int]) -> tuple[list[Row], list[Row]]:
    """(rows to upsert, PK tuples to delete): the last change of every primary key wins
    (``+I``/``+U`` upsert the row, ``-U``/``-D`` delete its key), in the order each key was first
    seen. O(n)."""
    if len(pk) == 1:  # keyed by the value itself: it groups as its 1-tuple would, without building one
        column = pk[0]
        single: dict[Any, tuple[str, Row]] = {}
        for op, row in changes:
            single[row[column]] = (op, row)
        upserts = [row for op, row in single.values() if op in ("+I", "+U")]
        deletes: list[Row] = [(key,) for key, (op, _) in single.items() if op in ("-U", "-D")]
        return upserts, deletes
    final: dict[tuple[Any, ...], tuple[str, Row]] = {}
    for op, row in changes:
        final[tuple(row[column] for column in pk)] = (op, row)
    upserts = [row for op, row in final.values() if op in ("+I", "+U")]
    deletes = [key for key, (op, _) in final.items() if op in ("-U", "-D")]
    return upserts, deletes


def kill_point(point: str, batch_id: int) -> None:
    """SIGKILL this process if :data:`KILL_POINT_VARIABLE` names ``point`` of ``batch_id``.
    One environment lookup per call when unset."""
    wanted = os.environ.get(KILL_POINT_VARIABLE)
    if wanted and wanted == f"{point}:{batch_id}":
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class TaskOutput:
    """What a :class:`TaskWriter` staged for its part of a batch: the encoded commit metadata
    (``messages``: bytes in the format's own documented encoding, never pickled) and the net
    changes it covered."""

    messages: tuple[bytes, ...]
    upserts: int
    deletes: int


class TaskWriter(ABC):
    """Stages one part of a batch (the net changes of the keys of one Spark task) from an
    executor, committing nothing (see the module). Picklable: plain data only, the table opened
    in :meth:`write`. No pyspark import."""

    @abstractmethod
    def write(self, batch: NetBatch) -> TaskOutput:
        """Stage ``batch``'s upserts and deletes (``batch`` holds the keys of this part only)."""


class BatchSink(ABC):
    """Where the pipeline commits its micro-batches, each exactly once (see the module).

    Subclasses set :attr:`table`, :attr:`pk`, :attr:`where` (the sink in messages) and
    :attr:`errors` (the sink library's error classes: what becomes a :class:`SinkFailure`), and
    implement the three steps of :meth:`apply_batch`. Not thread-safe: one writer per sink object.
    """

    table: str
    pk: tuple[int, ...]
    where: str = "the sink"
    errors: tuple[type[BaseException], ...] = (Exception,)
    hint: ClassVar[str] = "free space"
    """What to fix when a batch fails (the :class:`SinkFailure` message says "Fix the sink (HINT)")."""
    marks_empty_batches: ClassVar[bool] = False
    """True: a batch that changes nothing is still committed (its id recorded); False: it commits
    nothing (a lakehouse sink writes no empty snapshot)."""

    def apply_batch(
        self,
        query_id: str,
        batch_id: int,
        changes: Sequence[tuple[str, Row]],
        misses: Sequence[tuple[int, str]] = (),
    ) -> BatchOutcome:
        """Apply ``changes`` (arrival order) as batch ``batch_id`` of query ``query_id``, atomically,
        with the batch id; a batch already committed is skipped (``BatchOutcome.skipped``).

        ``misses``: the batch's explained misses (:mod:`upsertmat.spark.misses`), written in the
        same transaction by sinks that record them (:attr:`SinkKind.records_misses
        <upsertmat.sinks.kind.SinkKind.records_misses>`). A sink that fails (unreachable, full,
        read-only) raises a :class:`SinkFailure` naming the sink and the batch: nothing of the
        batch is applied, every earlier batch stays committed. O(changes) plus the sink's write.
        """
        upserts, deletes = last_per_key(changes, self.pk)
        batch = NetBatch(query_id, batch_id, len(changes), upserts, deletes, misses)
        with self._failures_wrapped(batch_id):
            with self._begin() as transaction:
                if self._committed(transaction, query_id, batch_id):
                    return BatchOutcome(0, 0, skipped=True)
                if batch.empty and not self.marks_empty_batches:
                    return BatchOutcome(0, 0, skipped=False)
                self._write(transaction, batch)
                kill_point("before-commit", batch_id)
            kill_point("after-commit", batch_id)
        return BatchOutcome(len(upserts), len(deletes), skipped=False)

    @contextmanager
    def _failures_wrapped(self, batch_id: int) -> Iterator[None]:
        """The sink's own errors (:attr:`errors`) raised as :meth:`failure` of ``batch_id``; a
        :class:`SinkError` as it is; anything else (a bug) unchanged."""
        try:
            yield
        except SinkError:
            raise
        except self.errors as error:
            raise self.failure(batch_id, error, self.hint) from error

    def task_writer(self, query_id: str, batch_id: int) -> TaskWriter | None:
        """A :class:`TaskWriter` staging parts of batch ``batch_id`` in the executors, or None when
        the sink's batch is written by the driver (:meth:`apply_batch`): the SQL sinks (one
        transaction with the batch marker; SQLite is a file on the driver's machine), Delta and
        Iceberg (their Python writers stage a commit in the process that commits it)."""
        return None

    def is_committed(self, query_id: str, batch_id: int) -> bool:
        """True when batch ``batch_id`` of ``query_id`` (or a later one) is committed: checked
        before the executors write a replayed batch. Errors as :meth:`apply_batch`'s."""
        with self._failures_wrapped(batch_id), self._begin() as transaction:
            return self._committed(transaction, query_id, batch_id)

    def commit_written(
        self,
        query_id: str,
        batch_id: int,
        outputs: Sequence[TaskOutput],
        misses: Sequence[tuple[int, str]] = (),
    ) -> BatchOutcome:
        """Commit what the :meth:`task_writer`'s tasks staged for batch ``batch_id`` (the outputs
        of the successful task attempts), atomically, with the batch id: the driver's part of a
        batch written in the executors. A batch already committed is skipped (its staged files
        stay unreferenced); nothing staged commits nothing. Kill points and errors as
        :meth:`apply_batch`'s. O(messages): no row of the batch passes here."""
        upserts = sum(output.upserts for output in outputs)
        deletes = sum(output.deletes for output in outputs)
        batch = NetBatch(query_id, batch_id, upserts + deletes, [], [], misses)
        with self._failures_wrapped(batch_id):
            with self._begin() as transaction:
                if self._committed(transaction, query_id, batch_id):
                    return BatchOutcome(0, 0, skipped=True)
                if upserts + deletes == 0 and not self.marks_empty_batches:
                    return BatchOutcome(0, 0, skipped=False)
                self._stage_written(transaction, batch, [m for output in outputs for m in output.messages])
                kill_point("before-commit", batch_id)
            kill_point("after-commit", batch_id)
        return BatchOutcome(upserts, deletes, skipped=False)

    def _stage_written(self, transaction: Any, batch: NetBatch, messages: Sequence[bytes]) -> None:
        """Stage the executors' encoded ``messages`` of ``batch`` (its id; no rows) in
        ``transaction``: only sinks with a :meth:`task_writer` implement it."""
        raise NotImplementedError(f"{self.where} is written by the driver only")

    @abstractmethod
    def _begin(self) -> AbstractContextManager[Any]:
        """The batch's transaction: entering it starts one (a SQL transaction, the table's
        current version), leaving it normally commits what :meth:`_write` staged in ONE atomic
        step (SQL ``COMMIT``, Delta's log entry, Iceberg's metadata swap, Paimon's snapshot),
        leaving it by an exception discards it. Nothing staged: nothing committed."""

    @abstractmethod
    def _committed(self, transaction: Any, query_id: str, batch_id: int) -> bool:
        """True when batch ``batch_id`` of ``query_id`` (or a later one) is already committed."""

    @abstractmethod
    def _write(self, transaction: Any, batch: NetBatch) -> None:
        """Stage ``batch`` in ``transaction``, together with its batch id (committed when
        :meth:`_begin`'s context ends)."""

    def failure(self, batch_id: int, error: BaseException, hint: str = "") -> SinkFailure:
        """The :class:`SinkFailure` of a batch the sink could not commit: the sink, the batch, the
        error, that every earlier batch is committed, and what to do (``hint``: "free space")."""
        fix = f"Fix the sink ({hint})" if hint else "Fix the sink"
        return SinkFailure(
            f"{self.where} failed on micro-batch {batch_id}: {type(error).__name__}: {str(error).strip()}; "
            f"every batch before it is committed and this one is not. {fix} and run the job again: "
            "it continues at this batch, each batch applied once"
        )

    @abstractmethod
    def rows(self) -> list[Row]:
        """Every row of the table, ordered by primary key (for checks and the demo)."""

    @abstractmethod
    def committed_batches(self) -> int:
        """How many batches are recorded as committed."""

    def close(self) -> None:  # noqa: B027 - a file-based table holds nothing to release
        """Release the sink's connection (nothing for file-based tables)."""
