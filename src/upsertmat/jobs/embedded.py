"""The embedded client's side of a run: the session directory of an internal sink, and the result
follower that feeds a result mode after every committed micro-batch.

**Session directory.** A job with ``sink: {internal: true}`` keeps its result inside the client:
an embedded SQLite database ``result.db`` and the job's checkpoint, both in the session
directory. By default that is a new temporary directory (``<tmp>/upsertmat-session-*``),
removed when the client exits, so exiting the embedded client stops such a job and its result
goes with it (the checkpoint goes too: a checkpoint without its table would continue into an
empty one). ``--session-dir DIR`` keeps both there, and a rerun with the same directory
continues exactly once, like a job writing an external sink.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .model import JobSpec
from .results import Renderer, ResultChange, Snapshot

if TYPE_CHECKING:
    from ..spark.config import BatchProgress

RESULT_DATABASE = "result.db"
CHANGES_PER_READ = 10_000


def internal_job(job: JobSpec, directory: Path) -> JobSpec:
    """``job`` with its internal sink and its checkpoint in ``directory``."""
    return replace(
        job,
        sink=replace(job.sink, url=str(directory / RESULT_DATABASE)),
        checkpoint=directory / "checkpoint",
    )


@contextmanager
def embedded_session(job: JobSpec, directory: Path | None) -> Iterator[JobSpec]:
    """Yield the job to run: unchanged for an external sink; for an internal one, with its
    database and checkpoint in ``directory`` (kept) or in a new temporary directory (removed on
    exit)."""
    if not job.sink.internal:
        yield job
        return
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        yield internal_job(job, directory.resolve())
        return
    temporary = Path(tempfile.mkdtemp(prefix="upsertmat-session-"))
    try:
        yield internal_job(job, temporary)
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


class ResultFollower:
    """After each committed batch, read what it committed and hand it to a renderer.

    ``table`` mode reads one snapshot (at most ``max_rows`` rows, one read transaction);
    ``changelog``/``tableau`` read the changes after the last position seen, starting after the
    changes earlier runs committed (they printed those), so the outputs of a run and its reruns
    put together are the changelog, each change once. Called from the thread that ran the batch,
    after the sink's commit: the results read are committed ones.
    """

    def __init__(
        self, url: str, table: str, pk: tuple[str, ...], mode: str, renderer: Renderer, max_rows: int
    ):
        self.url, self.table, self.pk = url, table, pk
        self.mode = mode
        self.renderer = renderer
        self.max_rows = max_rows
        self.position = 0
        if mode != "table":
            from ..sinks import last_position

            self.position = last_position(url, table)
        self.changes = 0
        self.elapsed = 0.0
        self.closed = False  # stdout's reader went away (tableau | head): the run stops, exit 141
        self.lock = threading.Lock()

    def rate(self) -> float:
        """Changes that reached the sink per second since the query started."""
        return self.changes / self.elapsed if self.elapsed > 0 else 0.0

    def on_batch(self, progress: BatchProgress) -> None:
        """The progress callback: one batch committed."""
        with self.lock:
            self.changes += progress.changes
            self.elapsed = progress.elapsed_seconds
            self.show()

    def show(self) -> None:
        """:meth:`refresh`, unless stdout's reader went away (then ``closed`` turns true: raised in
        the batch's callback, the error would fail the query; the run stops instead)."""
        if self.closed:
            return
        try:
            self.refresh()
        except BrokenPipeError:
            self.closed = True

    def refresh(self) -> None:
        """Read and render what is committed now."""
        from ..sinks import read_changes, read_snapshot

        if self.mode == "table":
            found = read_snapshot(self.url, self.table, self.pk, limit=self.max_rows)
            snapshot = Snapshot(found.batch_id, found.columns, found.rows, found.total)
            self.renderer.show_table(snapshot, self.rate())
            return
        while True:
            changes = read_changes(self.url, self.table, self.position, CHANGES_PER_READ)
            if not changes:
                return
            self.position = changes[-1].pos
            self.renderer.add_changes(
                [ResultChange(c.pos, c.batch_id, c.op, c.row) for c in changes], self.rate()
            )
