"""The gateway's work, without HTTP: sessions, jobs on one Spark session, and their results.

:class:`Gateway` owns the registry (:mod:`.registry`), the Spark session (built on the configured
master when the gateway starts) and one thread per running job. A job thread resolves the job
(configuration layers: built-in < the pipeline's < service defaults < session < the job file's
``config`` < the request's settings), starts its continuous query (trigger every
``trigger_interval``; the sink records each batch's table changes for the changelog result) and
waits until it is asked to stop (at a micro-batch boundary) or fails; a failure marks the job
``FAILED`` with its message and touches no other job.

Results (:meth:`Gateway.table_page`, :meth:`Gateway.changelog_page`) are read from the job's
sink: what committed batches left there, never a half-applied batch (:mod:`upsertmat.sinks`).

Every problem a request can cause is a :class:`RequestError` with an HTTP status and a message;
anything else is a bug (the HTTP layer answers 500 and logs it).
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml

from ..impls.config import ConfigError, flatten
from ..jobs.embedded import RESULT_DATABASE
from ..jobs.loader import Layer, job_from_document, resolve_settings, settings_layers
from ..jobs.model import JobSpec
from ..jobs.runner import pipeline_config
from ..plan.codec import parse_plan
from ..plan.compiler import compile_job, job_of_plan
from ..plan.explain import explain
from ..plan.model import PlanError
from ..sinks import SinkError, read_changes, read_snapshot, snapshot_header
from ..sinks import drop_results as drop_sink_results
from .confine import OutsideRoot, Taken, check_taken, confine_job
from .contract import Change, ChangelogPage, JobStatus, ResultsOnDelete, TablePage
from .lifecycle import ACTIVE, TERMINAL, BadTransition, Event, JobState
from .registry import JobRecord, Registry, SessionRecord, new_id
from .settings import GatewaySettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..spark.config import BatchProgress
    from ..spark.pipeline import PipelineRun

ACTIVE_STATES = frozenset(state.value for state in ACTIVE)
TERMINAL_STATES = frozenset(state.value for state in TERMINAL)
RATE_WINDOW = 20  # batches the changes/s figure is taken over


class BatchMetrics(Protocol):
    """What the job threads tell the metrics endpoint (:class:`upsertmat.gateway.metrics.JobMetrics`,
    which imports this module, not the other way round)."""

    def batch(self, job_id: str, progress: BatchProgress) -> None: ...

    def read(self, job_id: str, rows: int) -> None: ...

    def forget(self, job_id: str) -> None: ...


class RequestError(Exception):
    """A request the gateway refuses: ``status`` (4xx) and a message naming what is wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class JobRuntime:
    """What the gateway knows of a running job in this process (not persisted)."""

    stop: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    run: PipelineRun | None = None
    batches: int = 0
    changes: int = 0
    last_batch: int | None = None
    last_batch_at: float | None = None
    running_since: float | None = None
    polled: float = 0.0  # monotonic time of the last progress read (Gateway._poll)
    counted_batch: int = -1  # the last batch whose source rows were counted
    # (time, changes) of the last batches, after a (start time, 0) entry: the rate's window.
    recent: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=RATE_WINDOW + 1))

    def started(self) -> None:
        self.running_since = time.time()
        self.recent.append((self.running_since, 0))

    def on_batch(self, progress: BatchProgress) -> None:
        now = time.time()
        self.batches += 1
        self.changes += progress.changes
        self.last_batch = progress.batch_id
        self.last_batch_at = now
        self.recent.append((now, progress.changes))

    def rate(self) -> float:
        """Changes per second over the last batches (since the query started, for the first ones)."""
        if len(self.recent) < 2:
            return 0.0
        span = self.recent[-1][0] - self.recent[0][0]
        return sum(count for _, count in list(self.recent)[1:]) / span if span > 0 else 0.0


MAX_YAML_DEPTH = 32


def load_submitted(text: str) -> Any:
    """A submitted job's or plan's YAML/JSON, parsed safely: no aliases (an alias bomb expands
    exponentially when the document is walked), nesting at most :data:`MAX_YAML_DEPTH` deep.
    RequestError (400) otherwise. O(len(text))."""
    try:
        depth = 0
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                raise RequestError(400, "the job uses a YAML alias (*name); write the values out")
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise RequestError(400, f"the job nests deeper than {MAX_YAML_DEPTH} levels")
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise RequestError(400, f"the job is not valid YAML: {error}") from None


def concise(error: BaseException) -> str:
    """One line for a job's failure: the innermost ``SomethingError: message`` Spark's text
    carries (a Python worker's exception is wrapped several times), at most 500 characters."""
    text = str(error)
    found = re.findall(r"^\s*([A-Za-z_.]*(?:Error|Exception|Failure)): (.+)$", text, re.MULTILINE)
    skip = ("StreamingQueryException", "Py4JJavaError", "PythonException", "SparkException")
    useful = [
        f"{kind.rsplit('.', 1)[-1]}: {message.strip()}" for kind, message in found if not kind.endswith(skip)
    ]
    line = useful[-1] if useful else (text.strip().splitlines() or [type(error).__name__])[0]
    return line[:500]


class Gateway:
    """Sessions, jobs and results of one gateway process."""

    def __init__(
        self,
        settings: GatewaySettings,
        spark: SparkSession | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        self.settings = settings
        self.root = settings.root.resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "jobs").mkdir(exist_ok=True)
        self.registry = Registry(self.root)
        self.spark = spark
        self.log = log or (lambda text: None)
        self.runtimes: dict[str, JobRuntime] = {}
        self.lock = threading.RLock()
        self.start_lock = threading.Lock()  # one query starts at a time (session conf per query)
        self.closing = False
        self._resolved: dict[str, JobSpec] = {}
        self.metrics: BatchMetrics | None = None  # set by the metrics endpoint (upsertmat.gateway.metrics)
        self._cursor_locks = [threading.Lock() for _ in range(64)]  # one token served at a time

    # sessions

    def open_session(self, properties: Mapping[str, Any]) -> SessionRecord:
        self.expire()
        if len(self.registry.sessions()) >= self.settings.max_sessions:
            raise RequestError(
                429, f"too many sessions (max-sessions {self.settings.max_sessions}); close one"
            )
        layer = self._check_properties(properties, "the session's properties")
        return self.registry.add_session(layer)

    def session(self, session_id: str) -> SessionRecord:
        found = self.registry.session(session_id)
        if found is None:
            raise RequestError(404, f"no session {session_id!r} (closed, expired or never opened)")
        self.registry.touch_session(session_id)
        return found

    def configure_session(self, session_id: str, properties: Mapping[str, Any]) -> SessionRecord:
        current = self.session(session_id)
        layer = self._check_properties(
            {**current.properties, **flatten(dict(properties))}, "the session's properties"
        )
        self.registry.touch_session(session_id, layer)
        return self.session(session_id)

    def close_session(self, session_id: str) -> None:
        self.session(session_id)
        self.registry.remove_session(session_id)

    def _check_properties(self, properties: Mapping[str, Any], where: str) -> dict[str, Any]:
        """The flattened layer; RequestError (400) naming an unknown key or a bad value."""
        layer = flatten(dict(properties))
        try:
            resolve_settings(settings_layers({}, "", [], [(where, layer)]))
        except ConfigError as error:
            raise RequestError(400, str(error)) from None
        return layer

    def expire(self) -> None:
        """Drop sessions idle past ``session_idle_seconds``, snapshots past their time and
        changelog readers unused for ``cursor_idle_seconds``."""
        now = time.time()
        for record in self.registry.sessions():
            if record.last_used < now - self.settings.session_idle_seconds:
                self.registry.remove_session(record.id)
        self.registry.expire_snapshots(now)
        self.registry.expire_cursors(now - self.settings.cursor_idle_seconds)

    # jobs

    def job_dir(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def resolve(self, record: JobRecord) -> JobSpec:
        """:meth:`resolve_record`, cached per job (a record's document and layers never change)."""
        cached = self._resolved.get(record.id)
        if cached is not None:
            return cached
        job = self.resolve_record(record)
        if self.registry.job(record.id) is not None:
            self._resolved[record.id] = job
        return job

    def resolve_record(self, record: JobRecord) -> JobSpec:
        """The job a record describes, every layer applied, confined to the data root.

        ``record.settings`` holds ``{"session": layer, "request": layer}``: the session's layer is
        copied into the job when it is submitted, since a job outlives its session."""
        below: list[Layer] = [("the gateway's defaults", flatten(self.settings.defaults))]
        session = record.settings.get("session") or {}
        if session:
            below.append((f"session {record.session_id}", session))
        layer = record.settings.get("request") or {}
        request: list[Layer] = [("the request's settings", layer)] if layer else []
        directory = self.job_dir(record.id)
        internal = str(directory / RESULT_DATABASE)
        try:
            if record.kind == "plan":
                plan = parse_plan(load_submitted(record.document))
                job = job_of_plan(
                    plan,
                    self.root,
                    "the plan",
                    request,
                    output_base=directory,
                    internal_url=internal,
                    below_job=below,
                )
            else:
                data = load_submitted(record.document)
                if not isinstance(data, dict):
                    raise RequestError(400, "the job must be a YAML mapping (name, source, keys, sink, …)")
                spark = data.get("spark")
                if isinstance(spark, dict):
                    self._check_spark(spark)
                job = job_from_document(
                    data,
                    base=self.root,
                    where="the job",
                    cli_layers=request,
                    output_base=directory,
                    internal_url=internal,
                    below_job=below,
                )
        except (PlanError, ConfigError) as error:
            raise RequestError(400, str(error)) from None
        try:
            confine_job(job, self.root, directory)
        except OutsideRoot as error:
            raise RequestError(403, str(error)) from None
        return job

    def _check_spark(self, spark: Mapping[str, Any]) -> None:
        master = spark.get("master")
        if master is not None and master != self.settings.master:
            raise RequestError(
                400, f"spark.master: the gateway runs every job on its own master {self.settings.master!r}"
            )
        if spark.get("ui"):
            raise RequestError(400, "spark.ui: the gateway's Spark session has no UI per job")

    def submit(self, session_id: str, kind: str, document: str, settings: Mapping[str, Any]) -> JobRecord:
        """Validate and start a job; RequestError on anything wrong with it (nothing is kept then).

        Checked in this order: the document (400), paths under the root and none of the
        gateway's own (403), the source directory exists (404), no other job uses its paths
        (409), the bound on running jobs (429). The last two hold under one lock with the
        registry insert, so two requests at once cannot both take the last slot or one path."""
        session = self.session(session_id)
        layer = self._check_properties(settings, "the request's settings")
        job_id = new_id("j")
        layers = {"session": session.properties, "request": layer}
        probe = JobRecord(
            job_id,
            session_id,
            "job",
            kind,
            document,
            layers,
            "RUNNING",
            JobState.STARTING.value,
            None,
            time.time(),
        )
        job = self.resolve(probe)
        self._check_source(job)
        with self.lock:
            records = self.registry.jobs()
            self._check_taken(job, [other for other in records if other.id != job_id])
            self._check_slots(records)
            self.job_dir(job_id).mkdir(parents=True, exist_ok=True)
            record = self.registry.add_job(session_id, job.name, kind, document, layers, job_id)
        self._start(record)
        return record

    def _check_source(self, job: JobSpec) -> None:
        if not job.source.path.is_dir():
            raise RequestError(404, f"source.path {job.source.path} is not a directory under the data root")

    def _check_slots(self, records: list[JobRecord]) -> None:
        running = [other for other in records if other.state in ACTIVE_STATES]
        if len(running) >= self.settings.max_jobs:
            raise RequestError(429, f"too many running jobs (max-jobs {self.settings.max_jobs}); stop one")

    def _check_taken(self, job: JobSpec, others: list[JobRecord]) -> None:
        """RequestError 409 if ``job`` uses another registered job's paths (:func:`check_taken`)."""
        resolved = []
        for other in others:
            try:
                resolved.append((other.id, self.resolve(other)))
            except RequestError:
                continue  # a job that no longer resolves uses no path
        try:
            check_taken(job, self.root, resolved)
        except Taken as error:
            raise RequestError(409, str(error)) from None

    def _transition(
        self, job_id: str, event: Event, *, error: str | None = None, clear_error: bool = False
    ) -> JobRecord:
        """:meth:`Registry.transition`; RequestError 409 (naming the state) if not allowed, 404 if
        there is no such job."""
        try:
            return self.registry.transition(job_id, event, error=error, clear_error=clear_error)
        except BadTransition as refused:
            raise RequestError(409, str(refused)) from None
        except KeyError:
            raise RequestError(404, f"no job {job_id!r}") from None

    def _start(self, record: JobRecord) -> None:
        runtime = JobRuntime()
        with self.lock:
            self.runtimes[record.id] = runtime
        runtime.thread = threading.Thread(
            target=self._run, args=(record.id, runtime), daemon=True, name=f"upsertmat-job-{record.id}"
        )
        runtime.thread.start()

    def _run(self, job_id: str, runtime: JobRuntime) -> None:
        from ..spark.pipeline import start_pipeline

        record = self.registry.job(job_id)
        if record is None:
            return
        try:
            job = self.resolve(record)
            config = pipeline_config(
                job, follow=self.settings.trigger_interval, changelog=True, query_name=f"upsertmat_{job_id}"
            ).with_progress(functools.partial(self._on_batch, job_id, runtime))
            with self.start_lock:
                if runtime.stop.is_set():
                    raise _Stopped
                runtime.run = start_pipeline(config, self.spark)
                runtime.started()
            if runtime.stop.is_set():
                runtime.run.request_stop()
            self._quiet_transition(job_id, Event.STARTED, clear_error=True)
            self.log(f"job {job_id} ({record.name}) running")
            runtime.run.wait(functools.partial(self._poll, job_id, runtime))
            if not self.closing:
                self._quiet_transition(job_id, Event.ENDED)
                self.log(f"job {job_id} stopped")
        except _Stopped:
            if not self.closing:
                self._quiet_transition(job_id, Event.ENDED)
        except RequestError as error:
            self._quiet_transition(job_id, Event.FAILED, error=error.message)
        except Exception as error:  # the job failed (bad data, sink down, ...): this job only
            message = concise(error)
            self._quiet_transition(job_id, Event.FAILED, error=message)
            self.log(f"job {job_id} failed: {message}")
            if not isinstance(error, SinkError | ConfigError):
                self.log("".join(traceback.format_exception(error))[-4000:])
        finally:
            runtime.done.set()

    def _poll(self, job_id: str, runtime: JobRuntime) -> bool:
        """The job thread's stop check (a few times a second); at most once a second it also
        counts the source rows of the batches Spark reported since (``changes_in``). Spark's
        progress is read here rather than through a StreamingQueryListener: a Python listener
        kept every batch's query execution alive in the driver JVM (docs/gateway.md, Memory)."""
        now = time.monotonic()
        if self.metrics is not None and runtime.run is not None and now - runtime.polled >= 1.0:
            runtime.polled = now
            try:
                reports = runtime.run.query.recentProgress
            except Exception:  # the query ended while we asked
                reports = []
            for report in reports:
                batch = int(report.get("batchId", -1))
                if batch > runtime.counted_batch:
                    runtime.counted_batch = batch
                    self.metrics.read(job_id, int(report.get("numInputRows", 0)))
        return runtime.stop.is_set()

    def _on_batch(self, job_id: str, runtime: JobRuntime, progress: BatchProgress) -> None:
        runtime.on_batch(progress)
        if self.metrics is not None:
            self.metrics.batch(job_id, progress)

    def _quiet_transition(
        self, job_id: str, event: Event, *, error: str | None = None, clear_error: bool = False
    ) -> None:
        """A job thread's transition: one the table refuses (the job was stopped, or deleted,
        meanwhile) is logged and ignored."""
        try:
            self.registry.transition(job_id, event, error=error, clear_error=clear_error)
        except (BadTransition, KeyError) as refused:
            self.log(f"job {job_id}: {event.value} not recorded ({refused})")

    def job(self, job_id: str) -> JobRecord:
        found = self.registry.job(job_id)
        if found is None:
            raise RequestError(404, f"no job {job_id!r}")
        return found

    def stop(self, job_id: str) -> JobRecord:
        """Ask a job to stop at its next micro-batch boundary (its checkpoint is kept): a batch
        running now commits, no new batch starts. A job already stopping, stopped or failed is
        left as it is."""
        record = self.job(job_id)
        if record.state not in (JobState.STARTING.value, JobState.RUNNING.value):
            return record
        record = self._transition(job_id, Event.STOP)
        with self.lock:
            runtime = self.runtimes.get(job_id)
        if runtime is not None:
            runtime.stop.set()
            if runtime.run is not None:
                runtime.run.request_stop()
        else:
            self._quiet_transition(job_id, Event.ENDED)
        return self.job(job_id)

    def restart(self, job_id: str) -> JobRecord:
        """Start a stopped or failed job again on its checkpoint (409 from another state, or if
        another job took one of its paths meanwhile; 429 at the bound)."""
        record = self.job(job_id)
        if record.state not in TERMINAL_STATES:
            self._transition(job_id, Event.RESTART)  # raises the 409 naming the state
        job = self.resolve(record)
        self._check_source(job)
        with self.lock:
            runtime = self.runtimes.get(job_id)
            if runtime is not None and not runtime.done.is_set():
                raise RequestError(409, f"job {job_id} is still finishing its last batch; try again")
            records = self.registry.jobs()
            self._check_taken(job, [other for other in records if other.id != job_id])
            self._check_slots(records)
            record = self._transition(job_id, Event.RESTART, clear_error=True)
        self._start(record)
        return record

    def delete(self, job_id: str, results: ResultsOnDelete) -> Path | None:
        """Forget a stopped or failed job (409 otherwise): its registry rows, snapshots and
        changelog readers. ``results=keep`` moves its directory (checkpoint, internal result) to
        ``<root>/deleted/<job id>/`` and leaves an external sink as it is; ``delete`` removes the
        directory and drops an external SQLite sink's table with its recorded batches and
        changes. Where the directory went (keep), or None."""
        record = self.job(job_id)
        job: JobSpec | None
        try:
            job = self.resolve(record)
        except RequestError:
            job = None
        with self.lock:
            runtime = self.runtimes.get(job_id)
            if runtime is not None and not runtime.done.is_set() and record.state in TERMINAL_STATES:
                raise RequestError(409, f"job {job_id} is still finishing its last batch; try again")
            self._transition(job_id, Event.DELETE)
            self.runtimes.pop(job_id, None)
            self._resolved.pop(job_id, None)
        if self.metrics is not None:
            self.metrics.forget(job_id)
        directory = self.job_dir(job_id)
        if results is ResultsOnDelete.DELETE:
            if job is not None and not job.sink.internal:
                drop_results(job.sink.url, job.sink.table)
            shutil.rmtree(directory, ignore_errors=True)
            return None
        if not directory.exists():
            return None
        kept = self.root / "deleted" / job_id
        kept.parent.mkdir(exist_ok=True)
        os.replace(directory, kept)
        return kept

    def status(self, record: JobRecord) -> JobStatus:
        """A job's status as the API shows it (state, batches, rows, changes/s, last error)."""
        with self.lock:
            runtime = self.runtimes.get(record.id)
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
        except RequestError as error:
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

    def explain(self, job_id: str) -> str:
        record = self.job(job_id)
        job = self.resolve(record)
        return explain(compile_job(job), job)

    # results

    def table_page(
        self, job_id: str, token: str | None, page_size: int | None, max_rows: int | None = None
    ) -> TablePage:
        """A page of a table result set pinned to one committed batch.

        Without a token: a new snapshot of the table as the last committed batch left it (at most
        ``max_snapshot_rows`` rows held, fewer with ``max_rows`` or when the snapshot bytes bound
        cuts it), page 0. With ``<snapshot>.<page>``: that page of the same snapshot, whatever the
        job committed since; 410 once the snapshot has expired, 404 once it is gone (dropped by
        expiry or the bounds: the registry no longer knows it) or for a page it does not have.
        """
        record = self.job(job_id)
        settings = self.settings
        if token is None:
            size = self._page_size(page_size)
            job = self.resolve(record)
            try:
                held = min(max_rows or settings.max_snapshot_rows, settings.max_snapshot_rows)
                found = read_snapshot(job.sink.url, job.sink.table, job.primary_key, held)
            except SinkError as error:
                raise RequestError(409, str(error)) from None
            snapshot = self.registry.add_snapshot(
                job_id,
                found.batch_id,
                found.columns,
                found.rows,
                found.total,
                size,
                settings.snapshot_seconds,
                settings.max_snapshots,
                settings.max_snapshot_bytes,
            )
            page = 0
        else:
            snapshot_id, page = split_token(token, "t-")
            found_snapshot = self.registry.snapshot(snapshot_id)
            if found_snapshot is None or found_snapshot.job_id != job_id:
                raise RequestError(
                    404,
                    f"no snapshot for table token {token!r} (never issued, or expired and dropped): "
                    "start again without a token",
                )
            if found_snapshot.expires <= time.time():
                raise RequestError(
                    410, f"the snapshot of token {token!r} expired: start again without a token"
                )
            snapshot = found_snapshot
            pages = max(1, -(-snapshot.held // snapshot.page_size))
            if page >= pages:
                raise RequestError(404, f"token {token!r} names page {page}; the snapshot has {pages}")
        pages = max(1, -(-snapshot.held // snapshot.page_size))
        rows = self.registry.snapshot_page(snapshot.id, page)
        if rows is None:
            if snapshot.held:
                raise RequestError(404, f"the snapshot of token {snapshot.id}.{page} is gone: start again")
            rows = []
        return TablePage(
            job=job_id,
            snapshot=snapshot.id,
            batch=snapshot.batch_id,
            columns=list(snapshot.columns),
            rows=rows,
            page=page,
            pages=pages,
            total=snapshot.total,
            held=snapshot.held,
            expires=utc_time(snapshot.expires),
            token=f"{snapshot.id}.{page}",
            next_token=f"{snapshot.id}.{page + 1}" if page + 1 < pages else None,
        )

    def changelog_page(
        self,
        job_id: str,
        token: str | None,
        limit: int | None,
        start: str = "beginning",
        after: int | None = None,
    ) -> bytes:
        """The committed changes after a token, in order, as the JSON body to send (Flink's rule:
        the current token or the previous one). The body served for a token is stored: asking
        again for it (the previous token, or the current one while another request serves it)
        returns exactly those bytes, whatever was committed, stopped or restarted since. ``eos``
        once the job has stopped or failed and every change has been served. A new reader (no
        token) starts at the first change, after position ``after``, or with ``start="now"``
        after the last one committed."""
        record = self.job(job_id)
        job = self.resolve(record)
        size = self._page_size(limit)
        if token is None:
            first = 0 if after is None else after
            if after is None and start == "now":
                found_now = snapshot_header(job.sink.url, job.sink.table, job.primary_key)
                first = 0 if found_now is None else found_now.changes_pos
            cursor_id = self.registry.add_cursor(job_id, first, self.settings.max_readers)
            number = 0
        else:
            cursor_id, number = split_token(token, "c-")
        with self._cursor_locks[hash(cursor_id) % len(self._cursor_locks)]:
            found = self.registry.cursor(cursor_id)
            if found is None or found[0] != job_id:
                raise RequestError(
                    404,
                    f"no reader for changelog token {token!r} (never issued, or dropped): start again "
                    "without a token, or with after=<the last position you kept>",
                )
            current = found[1]
            page = self.registry.cursor_page(cursor_id, number)
            if page is None or number not in (current, current - 1):
                raise RequestError(
                    410,
                    f"changelog token {token!r} is stale: the gateway accepts the current token ({cursor_id}."
                    f"{current}) or the previous one",
                )
            first_pos, stored = page
            if stored is not None:
                self.registry.touch_cursor(cursor_id)
                return stored
            ended = self.job(job_id).state in TERMINAL_STATES  # read before the changes: none after it
            try:
                changes = read_changes(job.sink.url, job.sink.table, first_pos, size)
            except SinkError as error:
                raise RequestError(409, str(error)) from None
            eos = ended and not changes
            body = ChangelogPage(
                job=job_id,
                changes=[Change(pos=c.pos, batch=c.batch_id, op=c.op, row=list(c.row)) for c in changes],  # type: ignore[arg-type]
                token=f"{cursor_id}.{number}",
                next_token=None if eos else f"{cursor_id}.{number + 1}",
                eos=eos,
            )
            rendered = render_json(body.model_dump(mode="json"))
            return self.registry.serve_page(
                cursor_id, number, changes[-1].pos if changes else first_pos, rendered
            )

    def _page_size(self, size: int | None) -> int:
        if size is None:
            return self.settings.default_page_size
        if not 1 <= size <= self.settings.max_page_size:
            raise RequestError(400, f"page size must be 1..{self.settings.max_page_size}, got {size}")
        return size

    # life cycle

    def resume(self) -> list[str]:
        """Start again every job the registry wants running (after a restart); their ids. A job
        that was active but is not wanted running is recorded STOPPED."""
        resumed = []
        for record in self.registry.jobs():
            if record.state not in ACTIVE_STATES:
                continue
            if record.wanted == "RUNNING":
                self._start(self._transition(record.id, Event.RESUME))
                resumed.append(record.id)
            else:
                self._transition(record.id, Event.LOST)
        return resumed

    def shutdown(self, grace_seconds: float = 60.0) -> None:
        """Stop every job at a batch boundary, keeping what they want (RUNNING jobs resume on restart)."""
        self.closing = True
        with self.lock:
            runtimes = list(self.runtimes.values())
        for runtime in runtimes:
            runtime.stop.set()
            if runtime.run is not None:
                runtime.run.request_stop()
        deadline = time.monotonic() + grace_seconds
        for runtime in runtimes:
            if runtime.thread is not None:
                runtime.thread.join(max(0.1, deadline - time.monotonic()))
        self.registry.close()


class _Stopped(Exception):
    """A job asked to stop before its query started."""


TOKEN = re.compile(r"([tc]-[0-9a-f]{10})\.([0-9]{1,9})")


def split_token(token: str, prefix: str) -> tuple[str, int]:
    """``("c-…", 3)`` of ``"c-….3"``; RequestError (400) for anything else: the id is the prefix
    and ten hexadecimal digits, the page number ASCII digits (at most nine)."""
    match = TOKEN.fullmatch(token)
    if match is None or not token.startswith(prefix):
        raise RequestError(400, f"malformed token {token!r} (expected {prefix}<10 hex digits>.<page number>)")
    return match.group(1), int(match.group(2))


def render_json(content: Any) -> bytes:
    """Strict JSON (no NaN): a non-finite float is sent as ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"`` (:func:`portable`)."""
    try:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except ValueError:
        return json.dumps(portable(content), ensure_ascii=False, separators=(",", ":")).encode()


def portable(value: Any) -> Any:
    """``value`` with non-finite floats as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
    (JSON has no such numbers; a sink's DOUBLE column can hold them). O(size)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [portable(item) for item in value]
    return value


def utc_time(epoch: float | None) -> Any:
    """An epoch time as an aware UTC datetime (None stays None)."""
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)


def drop_results(url: str, table: str) -> None:
    """Drop an external sink's ``table`` with everything recorded for it (its kind's
    :meth:`~upsertmat.sinks.SinkKind.drop`: a SQL table with its batches, changes and misses; a
    Delta table's directory; an Iceberg table purged from its catalog)."""
    drop_sink_results(url, table)
