"""The gateway's work, without HTTP: sessions, jobs on one Spark session, and their results.

:class:`Gateway` owns the registry (:mod:`.registry`), the Spark session (built on the configured
master when the gateway starts) and one thread per running job. A job thread resolves the job
(configuration layers: built-in < the pipeline's < service defaults < session < the job file's
``config`` < the request's settings), starts its continuous query (trigger every
``trigger_interval``; the sink records each batch's table changes for the changelog result) and
waits until it is asked to stop (at a micro-batch boundary) or fails; a failure marks the job
``FAILED`` with its message and touches no other job.

Results (:meth:`Gateway.table_page`, :meth:`Gateway.changelog_page`) are read from the job's
sink: what committed batches left there, never a half-applied batch (:mod:`upsertmat.spark.results`).

Every problem a request can cause is a :class:`RequestError` with an HTTP status and a message;
anything else is a bug (the HTTP layer answers 500 and logs it).
"""

from __future__ import annotations

import re
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from ..impls.config import ConfigError, flatten
from ..jobs.loader import Layer, job_from_document
from ..jobs.model import JobSpec
from ..jobs.runner import pipeline_config
from ..plan.codec import parse_plan
from ..plan.compiler import compile_job, job_of_plan
from ..plan.explain import explain
from ..plan.model import PlanError
from ..spark.results import read_changes, read_snapshot
from ..spark.sink import SinkError
from .confine import OutsideRoot, confine_job
from .registry import JobRecord, Registry, SessionRecord, new_id
from .settings import GatewaySettings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..spark.config import BatchProgress
    from ..spark.pipeline import PipelineRun

RUNNING, STARTING, STOPPING, STOPPED, FAILED = "RUNNING", "STARTING", "STOPPING", "STOPPED", "FAILED"
TERMINAL = (STOPPED, FAILED)
RESULT_DATABASE = "result.db"
RATE_WINDOW = 20  # batches the changes/s figure is taken over


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
    thread: threading.Thread | None = None
    run: PipelineRun | None = None
    batches: int = 0
    changes: int = 0
    last_batch: int | None = None
    last_batch_at: float | None = None
    running_since: float | None = None
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
        from ..jobs.loader import resolve_settings, settings_layers

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
        except yaml.YAMLError as error:
            raise RequestError(400, f"the job is not valid YAML: {error}") from None
        except (PlanError, ConfigError) as error:
            raise RequestError(400, str(error)) from None
        try:
            confine_job(job, self.root)
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

        The bound and the conflict checks hold under one lock with the registry insert, so two
        requests at once cannot both take the last slot or the same checkpoint."""
        session = self.session(session_id)
        layer = self._check_properties(settings, "the request's settings")
        job_id = new_id("j")
        layers = {"session": session.properties, "request": layer}
        probe = JobRecord(
            job_id, session_id, "job", kind, document, layers, RUNNING, STARTING, None, time.time()
        )
        job = self.resolve(probe)
        if not job.source.path.is_dir():
            raise RequestError(400, f"source.path {job.source.path} is not a directory under the data root")
        with self.lock:
            running = [
                other for other in self.registry.jobs() if other.state in (RUNNING, STARTING, STOPPING)
            ]
            if len(running) >= self.settings.max_jobs:
                raise RequestError(
                    429, f"too many running jobs (max-jobs {self.settings.max_jobs}); stop one"
                )
            for other in running:
                other_job = self.resolve(other)
                if other_job.checkpoint == job.checkpoint:
                    raise RequestError(409, f"job {other.id} already runs on checkpoint {job.checkpoint}")
                if other_job.sink.url == job.sink.url and other_job.sink.table == job.sink.table:
                    raise RequestError(
                        409, f"job {other.id} already writes table {job.sink.table} of {job.sink.url}"
                    )
            self.job_dir(job_id).mkdir(parents=True, exist_ok=True)
            record = self.registry.add_job(session_id, job.name, kind, document, layers, job_id)
        self._start(record)
        return record

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
            ).with_progress(runtime.on_batch)
            with self.start_lock:
                if runtime.stop.is_set():
                    raise _Stopped
                runtime.run = start_pipeline(config, self.spark)
                runtime.started()
            self.registry.set_job(job_id, state=RUNNING, clear_error=True)
            self.log(f"job {job_id} ({record.name}) running")
            runtime.run.wait(runtime.stop.is_set)
            if not self.closing:
                self.registry.set_job(job_id, state=STOPPED)
                self.log(f"job {job_id} stopped")
        except _Stopped:
            if not self.closing:
                self.registry.set_job(job_id, state=STOPPED)
        except RequestError as error:
            self.registry.set_job(job_id, state=FAILED, wanted=STOPPED, error=error.message)
        except Exception as error:  # the job failed (bad data, sink down, ...): this job only
            message = concise(error)
            self.registry.set_job(job_id, state=FAILED, wanted=STOPPED, error=message)
            self.log(f"job {job_id} failed: {message}")
            if not isinstance(error, SinkError | ConfigError):
                self.log("".join(traceback.format_exception(error))[-4000:])

    def job(self, job_id: str) -> JobRecord:
        found = self.registry.job(job_id)
        if found is None:
            raise RequestError(404, f"no job {job_id!r}")
        return found

    def stop(self, job_id: str) -> JobRecord:
        """Ask a job to stop at its next micro-batch boundary (its checkpoint is kept)."""
        record = self.job(job_id)
        if record.state in TERMINAL:
            return record
        self.registry.set_job(job_id, wanted=STOPPED, state=STOPPING)
        with self.lock:
            runtime = self.runtimes.get(job_id)
        if runtime is not None:
            runtime.stop.set()
        else:
            self.registry.set_job(job_id, state=STOPPED)
        return self.job(job_id)

    def status(self, record: JobRecord) -> dict[str, Any]:
        """A job's status as the API shows it (state, batches, rows, changes/s, last error)."""
        with self.lock:
            runtime = self.runtimes.get(record.id)
        status: dict[str, Any] = {
            "id": record.id,
            "name": record.name,
            "session": record.session_id,
            "kind": record.kind,
            "state": record.state,
            "error": record.error,
            "created": record.created,
        }
        try:
            job = self.resolve(record)
        except RequestError as error:
            return {**status, "error": record.error or error.message}
        snapshot = _quiet_snapshot(job)
        status.update(
            {
                "table": job.sink.table,
                "sink": "internal" if job.sink.internal else job.sink.url,
                "committed_batch": None if snapshot is None else snapshot.batch_id,
                "rows": None if snapshot is None else snapshot.total,
                "batches": 0 if runtime is None else runtime.batches,
                "changes": 0 if runtime is None else runtime.changes,
                "changes_per_second": 0.0 if runtime is None else round(runtime.rate(), 1),
                "last_batch_at": None if runtime is None else runtime.last_batch_at,
                "running_since": None if runtime is None else runtime.running_since,
            }
        )
        return status

    def explain(self, job_id: str) -> str:
        record = self.job(job_id)
        job = self.resolve(record)
        return explain(compile_job(job), job)

    # results

    def table_page(
        self, job_id: str, token: str | None, page_size: int | None, max_rows: int | None = None
    ) -> dict[str, Any]:
        """A page of a table result set pinned to one committed batch.

        Without a token: a new snapshot of the table as the last committed batch left it (at most
        ``max_snapshot_rows`` rows held, fewer with ``max_rows``), page 0. With
        ``<snapshot>.<page>``: that page of the same snapshot, whatever the job committed since;
        410 once the snapshot has expired.
        """
        record = self.job(job_id)
        if token is None:
            size = self._page_size(page_size)
            job = self.resolve(record)
            try:
                held = min(max_rows or self.settings.max_snapshot_rows, self.settings.max_snapshot_rows)
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
                self.settings.snapshot_seconds,
            )
            page = 0
        else:
            snapshot_id, page = _split_token(token, "t-")
            found_snapshot = self.registry.snapshot(snapshot_id)
            if found_snapshot is None or found_snapshot.job_id != job_id:
                raise RequestError(
                    410,
                    f"table token {token!r} is unknown or its snapshot expired: start again without a token",
                )
            if found_snapshot.expires <= time.time():
                raise RequestError(
                    410, f"the snapshot of token {token!r} expired: start again without a token"
                )
            snapshot = found_snapshot
            pages = max(1, -(-snapshot.held // snapshot.page_size))
            if page >= pages:
                raise RequestError(400, f"token {token!r} names page {page}; the snapshot has {pages}")
        pages = max(1, -(-snapshot.held // snapshot.page_size))
        rows = self.registry.snapshot_rows(snapshot.id, page * snapshot.page_size, snapshot.page_size)
        return {
            "job": job_id,
            "snapshot": snapshot.id,
            "batch": snapshot.batch_id,
            "columns": list(snapshot.columns),
            "rows": rows,
            "page": page,
            "pages": pages,
            "total": snapshot.total,
            "held": snapshot.held,
            "expires": snapshot.expires,
            "token": f"{snapshot.id}.{page}",
            "next_token": f"{snapshot.id}.{page + 1}" if page + 1 < pages else None,
        }

    def changelog_page(
        self, job_id: str, token: str | None, limit: int | None, start: str = "beginning"
    ) -> dict[str, Any]:
        """The committed changes after a token, in order (Flink's rule: the current token or the
        previous one; the previous one returns the same page again). ``eos`` once the job has
        stopped or failed and every change has been served. A new reader (no token) starts at the
        first change, or with ``start="now"`` after the last one committed."""
        record = self.job(job_id)
        job = self.resolve(record)
        size = self._page_size(limit)
        if token is None:
            first = 0
            if start == "now":
                found_now = _quiet_snapshot(job)
                first = 0 if found_now is None else found_now.changes_pos
            cursor_id, number = self.registry.add_cursor(job_id, first), 0
        else:
            cursor_id, number = _split_token(token, "c-")
        found = self.registry.cursor(cursor_id)
        if found is None or found[0] != job_id:
            raise RequestError(
                410, f"changelog token {token!r} is unknown or expired: start again without a token"
            )
        current = found[1]
        page = self.registry.cursor_page(cursor_id, number)
        if number not in (current, current - 1) or page is None:
            raise RequestError(
                410,
                f"changelog token {token!r} is stale: the gateway accepts the current token ({cursor_id}."
                f"{current}) or the previous one",
            )
        after, upto = page
        ended = self.job(job_id).state in TERMINAL  # read before the changes: no change after it
        try:
            if number == current:
                changes = read_changes(job.sink.url, job.sink.table, after, size)
                self.registry.serve_page(cursor_id, number, changes[-1].pos if changes else after)
            else:  # the previous token: exactly the page served for it (the log is append-only)
                limit = self.settings.max_page_size
                changes = read_changes(job.sink.url, job.sink.table, after, limit, upto=upto)
        except SinkError as error:
            raise RequestError(409, str(error)) from None
        eos = ended and not changes
        return {
            "job": job_id,
            "changes": [{"pos": c.pos, "batch": c.batch_id, "op": c.op, "row": list(c.row)} for c in changes],
            "token": f"{cursor_id}.{number}",
            "next_token": None if eos else f"{cursor_id}.{number + 1}",
            "eos": eos,
        }

    def _page_size(self, size: int | None) -> int:
        if size is None:
            return self.settings.default_page_size
        if not 1 <= size <= self.settings.max_page_size:
            raise RequestError(400, f"page size must be 1..{self.settings.max_page_size}, got {size}")
        return size

    # life cycle

    def resume(self) -> list[str]:
        """Start again every job the registry wants running (after a restart); their ids."""
        resumed = []
        for record in self.registry.jobs():
            if record.wanted == RUNNING and record.state not in TERMINAL:
                self.registry.set_job(record.id, state=STARTING)
                self._start(record)
                resumed.append(record.id)
            elif record.state in (STARTING, STOPPING, RUNNING):  # stopped while the gateway was down
                self.registry.set_job(record.id, state=STOPPED)
        return resumed

    def shutdown(self, grace_seconds: float = 60.0) -> None:
        """Stop every job at a batch boundary, keeping what they want (RUNNING jobs resume on restart)."""
        self.closing = True
        with self.lock:
            runtimes = list(self.runtimes.values())
        for runtime in runtimes:
            runtime.stop.set()
        deadline = time.monotonic() + grace_seconds
        for runtime in runtimes:
            if runtime.thread is not None:
                runtime.thread.join(max(0.1, deadline - time.monotonic()))
        self.registry.close()


class _Stopped(Exception):
    """A job asked to stop before its query started."""


def _split_token(token: str, prefix: str) -> tuple[str, int]:
    """``("c-…", 3)`` of ``"c-….3"``; RequestError (400) for anything else."""
    name, dot, number = token.rpartition(".")
    if not dot or not name.startswith(prefix) or not number.isdigit() or len(number) > 12:
        raise RequestError(400, f"malformed token {token!r}")
    return name, int(number)


def _quiet_snapshot(job: JobSpec) -> Any:
    try:
        return read_snapshot(job.sink.url, job.sink.table, job.primary_key, 0)
    except SinkError:
        return None
