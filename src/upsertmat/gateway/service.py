"""The gateway's work, without HTTP: sessions, jobs on one Spark session, and their results.

:class:`Gateway` owns the registry (:mod:`.registry`), the Spark session (built on the configured
master when the gateway starts) and the job threads (:mod:`.runtime`), and puts together the
parts that each do one job: sessions (:mod:`.sessions`), resolving a job's document and layers
(:mod:`.resolver`), the result pages and their tokens (:mod:`.paging`). What it does itself is a
job's life: submit (the document read once, the job resolved once), stop, restart, delete, and
its status.

Every problem a request can cause is a domain error (:mod:`.errors`: Invalid, Forbidden,
NotFound, Conflict, Gone, OverBound) with a message; the routes turn each kind into its HTTP
status. Anything else is a bug (answered 500 and logged).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..jobs.model import JobSpec
from ..plan.compiler import compile_job
from ..plan.explain import explain
from ..sinks import SinkError, SinkUrlError, kind_of, snapshot_header
from .confine import Taken, check_taken
from .contract import BatchRecord, JobHistory, JobStatus, ResultsOnDelete, TablePage
from .documents import Submitted
from .encoding import utc_time
from .errors import Conflict, NotFound, OverBound, Refusal
from .lifecycle import ACTIVE, TERMINAL, BadTransition, Event, JobState, next_state
from .paging import ResultPages
from .registry import JobRecord, Registry, SessionRecord, new_id
from .resolver import Resolver
from .runtime import BatchMetrics, JobThreads
from .sessions import Sessions, check_properties
from .settings import GatewaySettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ACTIVE_STATES = frozenset(state.value for state in ACTIVE)
TERMINAL_STATES = frozenset(state.value for state in TERMINAL)


class Gateway:
    """Sessions, jobs and results of one gateway process."""

    def __init__(
        self,
        settings: GatewaySettings,
        spark: SparkSession | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.root = settings.root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "jobs").mkdir(exist_ok=True)
        self.registry = Registry(self.root)
        self.spark = spark
        self.log = log or (lambda text: None)
        self.lock = threading.RLock()  # admission checks and transitions of user requests
        self.sessions = Sessions(self.registry, settings)
        self.resolver = Resolver(self.root, self.registry, settings)
        self.threads = JobThreads(
            self.registry, self.resolver, spark, settings.trigger_interval, self.lock, self.log
        )
        self.pages = ResultPages(
            self.registry, settings, self.job, self.resolve, lambda record: record.state in TERMINAL_STATES
        )
        self._settings = settings

    @property
    def settings(self) -> GatewaySettings:
        return self._settings

    @settings.setter
    def settings(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self.sessions.settings = self.resolver.settings = self.pages.settings = settings

    @property
    def metrics(self) -> BatchMetrics | None:
        """The per-job instruments the job threads feed (set by :mod:`.metrics`)."""
        return self.threads.metrics

    @metrics.setter
    def metrics(self, metrics: BatchMetrics | None) -> None:
        self.threads.metrics = metrics

    # sessions

    def open_session(self, properties: Mapping[str, Any]) -> SessionRecord:
        return self.sessions.open(properties)

    def session(self, session_id: str) -> SessionRecord:
        return self.sessions.get(session_id)

    def configure_session(self, session_id: str, properties: Mapping[str, Any]) -> SessionRecord:
        return self.sessions.configure(session_id, properties)

    def close_session(self, session_id: str) -> None:
        self.sessions.close(session_id)

    def expire(self) -> None:
        """Drop sessions idle past ``session_idle_seconds``, snapshots past their time and
        changelog readers unused for ``cursor_idle_seconds``."""
        now = time.time()
        self.sessions.expire(now)
        self.registry.expire_snapshots(now)
        self.registry.expire_cursors(now - self.settings.cursor_idle_seconds)

    # jobs

    def job_dir(self, job_id: str) -> Path:
        return self.resolver.job_dir(job_id)

    def resolve(self, record: JobRecord) -> JobSpec:
        """The job a record describes, every layer applied, confined to the data root (cached)."""
        return self.resolver.resolve(record)

    def job(self, job_id: str) -> JobRecord:
        found = self.registry.job(job_id)
        if found is None:
            raise NotFound(f"no job {job_id!r}")
        return found

    def submit(self, session_id: str, submitted: Submitted, settings: Mapping[str, Any]) -> JobRecord:
        """Validate and start a job; a domain error on anything wrong with it (nothing is kept).

        The document was read once (``submitted``) and the job is resolved once, here; its
        thread runs that very spec. Checked in this order: the document (Invalid), paths under
        the root and none of the gateway's own (Forbidden), the source directory exists
        (NotFound), no other job uses its paths (Conflict), the bound on running jobs
        (OverBound). The last two hold under one lock with the registry insert, so two requests
        at once cannot both take the last slot or one path."""
        session = self.session(session_id)
        layer = check_properties(settings, "the request's settings")
        job_id = new_id("j")
        layers = {"session": session.properties, "request": layer}
        job = self.resolver.resolve_document(job_id, session_id, submitted, layers)
        self._check_source(job)
        with self.lock:
            records = self.registry.jobs()
            self._check_taken(job, records)
            self._check_slots(records)
            self.job_dir(job_id).mkdir(parents=True, exist_ok=True)
            record = self.registry.add_job(
                session_id, job.name, submitted.kind, submitted.text, layers, job_id
            )
            self.resolver.remember(job_id, job)
        self.threads.start(record.id, record.name, job)
        return record

    def _check_source(self, job: JobSpec) -> None:
        if not job.source.path.is_dir():
            raise NotFound(f"source.path {job.source.path} is not a directory under the data root")

    def _check_slots(self, records: list[JobRecord]) -> None:
        running = [other for other in records if other.state in ACTIVE_STATES]
        if len(running) >= self.settings.max_jobs:
            raise OverBound(f"too many running jobs (max-jobs {self.settings.max_jobs}); stop one")

    def _check_taken(self, job: JobSpec, others: list[JobRecord]) -> None:
        """Conflict if ``job`` uses another registered job's paths (:func:`check_taken`)."""
        resolved = []
        for other in others:
            try:
                resolved.append((other.id, self.resolve(other)))
            except Refusal:
                continue  # a job that no longer resolves uses no path
        try:
            check_taken(job, self.root, resolved)
        except Taken as error:
            raise Conflict(str(error)) from None

    def _transition(
        self, job_id: str, event: Event, *, error: str | None = None, clear_error: bool = False
    ) -> JobRecord:
        """:meth:`Registry.transition`; Conflict (in the user's words) if the job's state does not
        allow it, NotFound if there is no such job."""
        try:
            return self.registry.transition(job_id, event, error=error, clear_error=clear_error)
        except BadTransition as refused:
            raise Conflict(str(refused)) from None
        except KeyError:
            raise NotFound(f"no job {job_id!r}") from None

    def stop(self, job_id: str) -> JobRecord:
        """Ask a job to stop at its next micro-batch boundary (its checkpoint is kept): a batch
        running now commits, no new batch starts. A job already stopping, stopped or failed is
        left as it is."""
        record = self.job(job_id)
        if record.state not in (JobState.STARTING.value, JobState.RUNNING.value):
            return record
        self._transition(job_id, Event.STOP)
        if not self.threads.request_stop(job_id):
            self.threads.quiet_transition(job_id, Event.ENDED)
        return self.job(job_id)

    def restart(self, job_id: str) -> JobRecord:
        """Start a stopped or failed job again on its checkpoint (Conflict from another state, or
        if another job took one of its paths meanwhile; OverBound at the bound)."""
        record = self.job(job_id)
        if record.state not in TERMINAL_STATES:
            self._transition(job_id, Event.RESTART)  # raises the Conflict naming the state
        job = self.resolve(record)
        self._check_source(job)
        with self.lock:
            if self.threads.busy(job_id):
                raise Conflict(f"job {job_id} is still finishing its last batch; try again")
            records = self.registry.jobs()
            self._check_taken(job, [other for other in records if other.id != job_id])
            self._check_slots(records)
            record = self._transition(job_id, Event.RESTART, clear_error=True)
        self.threads.start(record.id, record.name, job)
        return record

    def delete(self, job_id: str, results: ResultsOnDelete) -> Path | None:
        """Forget a stopped or failed job (Conflict otherwise): its registry rows, snapshots and
        changelog readers. ``results=keep`` moves its directory (checkpoint, internal result) to
        ``<root>/deleted/<job id>/`` and leaves an external sink as it is; ``delete`` drops the
        external sink's table (:func:`drop_results`) and removes the directory. Where the
        directory went (keep), or None.

        The results go first and the job is forgotten only once they are gone, all under the
        lock that admission and restarts take: a drop or a move that fails raises Conflict
        naming it, and leaves the job as it was, so the same DELETE can be asked again."""
        job: JobSpec | None
        try:
            job = self.resolve(self.job(job_id))
        except Refusal:
            job = None  # a job that no longer resolves: its directory is all there is
        with self.lock:
            record = self.job(job_id)
            try:
                next_state(job_id, JobState(record.state), Event.DELETE)
            except BadTransition as refused:
                raise Conflict(str(refused)) from None
            if self.threads.busy(job_id):
                raise Conflict(f"job {job_id} is still finishing its last batch; try again")
            directory = self.job_dir(job_id)
            kept: Path | None = None
            if results is ResultsOnDelete.DELETE:
                if job is not None and not job.sink.internal:
                    drop_results(job.sink.url, job.sink.table)
                _remove(directory, job_id)
            elif directory.exists():
                kept = _keep(directory, self.root / "deleted" / job_id, job_id)
            self._transition(job_id, Event.DELETE)
            self.resolver.forget(job_id)
        self.threads.forget(job_id)
        return kept

    def status(self, record: JobRecord) -> JobStatus:
        """A job's status as the API shows it (state, batches, rows, changes/s, last error)."""
        runtime = self.threads.runtime(record.id)
        status = JobStatus(
            id=record.id,
            name=record.name,
            session=record.session_id,
            kind="plan" if record.kind == "plan" else "job",
            state=JobState(record.state),
            wanted="STOPPED" if record.wanted == "STOPPED" else "RUNNING",
            error=record.error,
            created=utc_time(record.created),
        )
        try:
            job = self.resolve(record)
        except Refusal as error:
            return status.model_copy(update={"error": record.error or error.message})
        snapshot = snapshot_header(job.sink.url, job.sink.table, job.primary_key)
        update: dict[str, Any] = {
            "table": job.sink.table,
            "sink": "internal" if job.sink.internal else job.sink.url,
            "committed_batch": None if snapshot is None else snapshot.batch_id,
            "rows": None if snapshot is None else snapshot.total,
        }
        if runtime is not None:
            update.update(
                batches=runtime.batches,
                changes=runtime.changes,
                changes_per_second=round(runtime.rate(), 1),
                last_batch_at=utc_time(runtime.last_batch_at),
                running_since=utc_time(runtime.running_since),
            )
        return status.model_copy(update=update)

    def history(self, job_id: str) -> JobHistory:
        """The job's last batches in this process, oldest first (none if it has not run here)."""
        self.job(job_id)
        runtime = self.threads.runtime(job_id)
        points = [] if runtime is None else list(runtime.history)
        return JobHistory(
            job=job_id,
            batches=[
                BatchRecord(
                    at=utc_time(point.at),
                    batch=point.batch_id,
                    changes=point.changes,
                    changes_per_second=round(point.changes_per_second, 1),
                    batch_seconds=round(point.batch_seconds, 3),
                    files_waiting=point.files_waiting,
                )
                for point in points
            ],
        )

    def explain(self, job_id: str) -> str:
        record = self.job(job_id)
        job = self.resolve(record)
        return explain(compile_job(job), job)

    # results

    def table_page(
        self, job_id: str, token: str | None, page_size: int | None, max_rows: int | None = None
    ) -> TablePage:
        """:meth:`.paging.ResultPages.table_page`."""
        return self.pages.table_page(job_id, token, page_size, max_rows)

    def changelog_page(
        self,
        job_id: str,
        token: str | None,
        limit: int | None,
        start: str = "beginning",
        after: int | None = None,
    ) -> bytes:
        """:meth:`.paging.ResultPages.changelog_page`."""
        return self.pages.changelog_page(job_id, token, limit, start, after)

    # life cycle

    def resume(self) -> list[str]:
        """Start again every job the registry wants running (after a restart); their ids. A job
        that was active but is not wanted running is recorded STOPPED."""
        resumed = []
        for record in self.registry.jobs():
            if record.state not in ACTIVE_STATES:
                continue
            if record.wanted == "RUNNING":
                record = self._transition(record.id, Event.RESUME)
                self.threads.start(record.id, record.name)
                resumed.append(record.id)
            else:
                self._transition(record.id, Event.LOST)
        return resumed

    def shutdown(self, grace_seconds: float = 60.0) -> None:
        """Stop every job at a batch boundary, keeping what they want (RUNNING jobs resume on restart)."""
        self.threads.shutdown(grace_seconds)
        self.registry.close()


def _remove(directory: Path, job_id: str) -> None:
    """Remove a job's directory; Conflict if any of it stays (the job is kept)."""
    try:
        shutil.rmtree(directory)
    except FileNotFoundError:
        pass
    except OSError as error:
        raise Conflict(
            f"cannot remove job {job_id}'s directory {directory}: {error.strerror or error}; "
            "the job is kept: fix it and delete again"
        ) from None


def _keep(directory: Path, kept: Path, job_id: str) -> Path:
    """Move a job's directory to ``kept``; Conflict if it cannot be (the job is kept)."""
    try:
        kept.parent.mkdir(exist_ok=True)
        os.replace(directory, kept)
    except OSError as error:
        raise Conflict(
            f"cannot move job {job_id}'s directory to {kept}: {error.strerror or error}; "
            "the job is kept: fix it and delete again"
        ) from None
    return kept


def drop_results(url: str, table: str) -> None:
    """Drop a job's external sink table ``table`` of ``url``, whatever the sink: a SQLite table
    with the batches and changes recorded for it (one transaction), a Delta table's directory,
    an Iceberg table from its SQL catalog (``iceberg:///dir``) with its data and metadata files.
    Dropping what is already gone is not an error, so a retry finishes an interrupted drop.

    Conflict if it cannot be dropped (the message names the sink and why; nothing was
    forgotten), and for a sink the gateway cannot reach under its data root (a PostgreSQL
    database, a named Iceberg catalog: submitting such a job is refused already)."""
    where = f"the sink {url} table {table}"
    try:
        kind = kind_of(url)
        if kind.local_path(url) is None:
            raise Conflict(f"results=delete drops tables under the data root only, not {where}")
        kind.drop(url, table)
    except (SinkError, SinkUrlError) as error:
        raise Conflict(f"cannot drop {where}: {error}; the job is kept: fix it and delete again") from None
