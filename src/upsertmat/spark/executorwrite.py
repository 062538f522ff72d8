"""A micro-batch written from the executors: the driver handles metadata, not rows.

For a sink with a :meth:`~upsertmat.sinks.BatchSink.task_writer` (Paimon), ``foreachBatch`` does
not collect the batch: :func:`write_in_executors` runs :func:`write_part` in every task of the
batch's last stage (``mapInArrow``), where the task decodes its part of the materializer's output,
orders it by arrival, reduces it to the last change per key (:func:`~upsertmat.sinks.last_per_key`)
and lets the sink's task writer stage it (Paimon: data files, one per bucket the part touches).
What comes back to the driver is one small row per staged commit message (bytes in the format's
own encoding), one row of counts per task, and the rows the driver must see itself: bad source
rows and explained misses (few: they are exceptions, not data). The driver then commits the
messages once (:meth:`~upsertmat.sinks.BatchSink.commit_written`).

**Every key in one task.** The materializer's output is partitioned by its grouping key (the sink
key or its key bucket): every change of a key is in one task, so that task's last change is the
key's. A raw changelog (``materialize=False``) is repartitioned by the sink key first.

**Retries.** Spark keeps the result of ONE successful attempt of each task; the files a failed,
killed or duplicate (speculative) attempt staged are referenced by no message the driver
commits, and only the commit makes files visible (Paimon's snapshot): a retried task cannot
write a row twice. :data:`~upsertmat.sinks.base.TASK_FAILURE_VARIABLE` fails a first attempt on
purpose, after its files are staged (tests).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from pyspark.sql import DataFrame

from ..sinks import NetBatch, last_per_key
from ..sinks.base import TASK_FAILURE_VARIABLE, TaskOutput, TaskWriter
from .misses import MISS_OP
from .sources.badinput import BAD_OP

RESULT_SCHEMA = (
    "kind string, arrival bigint, op string, text string, message binary, upserts bigint, deletes bigint"
)
"""One row per result of a task: ``message`` (a staged commit message), ``counts`` (the task's
net upserts and deletes, and in ``arrival`` its changes) or ``row`` (a bad row or a miss:
``arrival``, ``op`` and the text of its single column)."""

Decoder = Callable[[Any], list[tuple[int, str, Any]]]


class TaskFailureInjected(RuntimeError):
    """The failure :data:`~upsertmat.sinks.base.TASK_FAILURE_VARIABLE` asks for (tests only)."""


class CountOnly(TaskWriter):
    """Stages nothing and counts the part's net changes: a replayed batch (already committed)
    still runs its stages (its state store version is written by running it), writing no file."""

    def write(self, batch: NetBatch) -> TaskOutput:
        return TaskOutput((), len(batch.upserts), len(batch.deletes))


def _inject_failure(batch_id: int) -> None:
    wanted = os.environ.get(TASK_FAILURE_VARIABLE)
    if not wanted:
        return
    from pyspark import TaskContext

    context = TaskContext.get()
    if (
        context is not None
        and context.attemptNumber() == 0
        and wanted == f"{batch_id}:{context.partitionId()}"
    ):
        raise TaskFailureInjected(f"{TASK_FAILURE_VARIABLE}={wanted}: the first attempt fails after staging")


def write_part(
    changes: Sequence[tuple[int | None, str, Any]],
    pk: Sequence[int],
    writer: TaskWriter,
    query_id: str,
    batch_id: int,
) -> tuple[TaskOutput, int, list[tuple[int | None, str, Any]]]:
    """(what ``writer`` staged, the part's change count, its bad rows and misses) for one task's
    decoded part ``changes`` ``(arrival, op, row)``. O(changes) plus the write. No Spark."""
    kept: list[tuple[int | None, str, Any]] = []  # every kept change has its arrival
    special: list[tuple[int | None, str, Any]] = []  # a bad row may have none
    for change in changes:
        op = change[1]
        (special if op == MISS_OP or op.startswith(BAD_OP) else kept).append(change)
    kept.sort(key=itemgetter(0))
    upserts, deletes = last_per_key([(op, row) for _, op, row in kept], pk)
    output = writer.write(NetBatch(query_id, batch_id, len(kept), upserts, deletes))
    return output, len(kept), special


def part_writer(
    decode: Decoder, pk: Sequence[int], writer: TaskWriter, query_id: str, batch_id: int
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of :func:`write_in_executors` (picklable: plain data and
    module functions)."""
    pk = tuple(pk)

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa  # type: ignore[import-untyped]

        parts = list(batches)
        changes = decode(pa.Table.from_batches(parts)) if parts else []
        output, count, special = write_part(changes, pk, writer, query_id, batch_id)
        _inject_failure(batch_id)
        rows: dict[str, list[Any]] = {name: [] for name in ("kind", "arrival", "op", "text", "message")}

        def add(kind: str, arrival: int | None, op: str, text: str | None, message: bytes | None) -> None:
            for name, value in zip(rows, (kind, arrival, op, text, message), strict=True):
                rows[name].append(value)

        for message in output.messages:
            add("message", 0, "", None, message)
        for arrival, op, row in special:
            # a processor's bad row or miss holds its text; a raw bad row's op holds it
            add("row", arrival, op, str(row[0]) if op in (MISS_OP, BAD_OP) else None, None)
        add("counts", count, "", None, None)
        size = len(rows["kind"])
        yield pa.RecordBatch.from_pydict(
            {
                **rows,
                "upserts": [0] * (size - 1) + [output.upserts],
                "deletes": [0] * (size - 1) + [output.deletes],
            },
            schema=pa.schema(
                [
                    ("kind", pa.string()),
                    ("arrival", pa.int64()),
                    ("op", pa.string()),
                    ("text", pa.string()),
                    ("message", pa.binary()),
                    ("upserts", pa.int64()),
                    ("deletes", pa.int64()),
                ]
            ),
        )

    return run


def write_in_executors(
    batch: DataFrame,
    decode: Decoder,
    pk: Sequence[int],
    writer: TaskWriter,
    query_id: str,
    batch_id: int,
    repartition_by: Sequence[str] = (),
) -> tuple[list[TaskOutput], int, list[tuple[int, str, Any]]]:
    """Run the batch with its write in the executors: (every task's :class:`TaskOutput`, the
    batch's change count, its bad rows and misses as ``(arrival, op, row)``, arrival order, rows
    without an arrival first).
    ``repartition_by``: the sink key columns when the frame is not partitioned by key. The
    driver receives O(tasks + messages + bad rows + misses) rows, none of the batch's changes."""
    if repartition_by:
        batch = batch.repartition(*repartition_by)
    result = batch.mapInArrow(part_writer(decode, pk, writer, query_id, batch_id), RESULT_SCHEMA).toArrow()
    outputs: list[TaskOutput] = []
    special: list[tuple[int, str, Any]] = []
    changes = 0
    messages: list[bytes] = []
    kinds = result.column("kind").to_pylist()
    arrivals = result.column("arrival").to_pylist()
    ops = result.column("op").to_pylist()
    texts = result.column("text").to_pylist()
    blobs = result.column("message").to_pylist()
    upserts = result.column("upserts").to_pylist()
    deletes = result.column("deletes").to_pylist()
    for index, kind in enumerate(kinds):
        if kind == "message":
            messages.append(blobs[index])
        elif kind == "row":
            text = texts[index]
            special.append((arrivals[index], ops[index], () if text is None else (text,)))
        else:
            changes += arrivals[index]
            outputs.append(TaskOutput((), upserts[index], deletes[index]))
    if messages:
        outputs.append(TaskOutput(tuple(messages), 0, 0))
    special.sort(key=lambda change: (change[0] is not None, change[0] or 0))  # a bad row may have none
    return outputs, changes, special
