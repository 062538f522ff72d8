"""The gateway's running jobs: one thread per job on the gateway's Spark session.

A job thread starts the job's continuous query (trigger every ``trigger_interval``; the sink
records each batch's table changes for the changelog result), records it ``RUNNING``, and waits
until it is asked to stop (at a micro-batch boundary) or fails; a failure marks the job
``FAILED`` with its message (:func:`concise`) and touches no other job. A transient failure
(Spark's Python worker not connecting back in time on a loaded machine) is retried from the
checkpoint a few times first; the job stays ``RUNNING`` meanwhile. What a running job did
in this process (batches, changes, its rate, a bounded history of its batches; over every
attempt, each batch once) is kept in its :class:`JobRuntime`, not persisted.
"""

from __future__ import annotations

import functools
import re
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from ..errors import RETRY_WAITS, transient_failure
from ..impls.config import ConfigError
from ..jobs.model import JobSpec
from ..jobs.runner import pipeline_config
from ..sinks import SinkError
from .errors import Refusal
from .lifecycle import BadTransition, Event
from .registry import Registry
from .resolver import Resolver
from .waiting import files_waiting

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..spark.config import BatchProgress
    from ..spark.pipeline import PipelineRun

RATE_WINDOW = 20  # batches the changes/s figure is taken over
HISTORY = 300  # batches a job's history keeps (the status page's plots)
WAITING_PERIOD = 2.0  # seconds between two counts of a job's files waiting


class BatchMetrics(Protocol):
    """What the job threads tell the metrics endpoint (:class:`upsertmat.gateway.metrics.JobMetrics`,
    which imports this module, not the other way round)."""

    def batch(self, job_id: str, progress: BatchProgress) -> None: ...

    def read(self, job_id: str, rows: int) -> None: ...

    def forget(self, job_id: str) -> None: ...


@dataclass(frozen=True)
class BatchPoint:
    """One committed batch in a job's history: when (epoch seconds), its id, the changes it
    applied, the job's rate then, its time in the sink step, and the files waiting then (None
    before the first count)."""

    at: float
    batch_id: int
    changes: int
    changes_per_second: float
    batch_seconds: float
    files_waiting: int | None


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
    polled: float = 0.0  # monotonic time of the last progress read (JobThreads._poll)
    counted_batch: int = -1  # the last batch whose source rows were counted
    waiting: int | None = None  # files waiting at the last count
    waiting_counted: float = -WAITING_PERIOD  # monotonic time of that count
    # (time, changes) of the last batches, after a (start time, 0) entry: the rate's window.
    recent: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=RATE_WINDOW + 1))
    history: deque[BatchPoint] = field(default_factory=lambda: deque(maxlen=HISTORY))

    def started(self) -> None:
        self.running_since = time.time()
        self.recent.append((self.running_since, 0))

    def on_batch(self, progress: BatchProgress) -> None:
        """Count a batch the job committed. A batch the sink skipped (committed already: an
        attempt retried from the checkpoint runs the last one again) adds nothing, so the counts
        span every attempt of this process with each batch once."""
        if progress.skipped:
            return
        now = time.time()
        self.batches += 1
        self.changes += progress.changes
        self.last_batch = progress.batch_id
        self.last_batch_at = now
        self.recent.append((now, progress.changes))
        self.history.append(
            BatchPoint(
                now, progress.batch_id, progress.changes, self.rate(), progress.sink_seconds, self.waiting
            )
        )

    def rate(self) -> float:
        """Changes per second over the last batches (since the query started, for the first ones)."""
        if len(self.recent) < 2:
            return 0.0
        span = self.recent[-1][0] - self.recent[0][0]
        return sum(count for _, count in list(self.recent)[1:]) / span if span > 0 else 0.0


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


class _Stopped(Exception):
    """A job asked to stop before its query started."""


class _GaveUp(Exception):
    """A transient failure still there after every retry: ``message`` says so."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class JobThreads:
    """The job threads of one gateway and what they know (``runtimes``, under ``lock``)."""

    def __init__(
        self,
        registry: Registry,
        resolver: Resolver,
        spark: SparkSession | None,
        trigger_interval: str,
        lock: threading.RLock,
        log: Callable[[str], None],
    ) -> None:
        self.registry = registry
        self.resolver = resolver
        self.spark = spark
        self.trigger_interval = trigger_interval
        self.lock = lock
        self.log = log
        self.runtimes: dict[str, JobRuntime] = {}
        self.start_lock = threading.Lock()  # one query starts at a time (session conf per query)
        self.closing = False
        self.metrics: BatchMetrics | None = None  # set by the metrics endpoint (upsertmat.gateway.metrics)

    def runtime(self, job_id: str) -> JobRuntime | None:
        with self.lock:
            return self.runtimes.get(job_id)

    def busy(self, job_id: str) -> bool:
        """True while the job's thread has not finished (its last batch may still commit)."""
        runtime = self.runtime(job_id)
        return runtime is not None and not runtime.done.is_set()

    def start(self, job_id: str, name: str, job: JobSpec | None = None) -> None:
        """Start the job's thread; ``job``: its spec when the caller has it (else resolved there)."""
        runtime = JobRuntime()
        with self.lock:
            self.runtimes[job_id] = runtime
        runtime.thread = threading.Thread(
            target=self._run, args=(job_id, name, job, runtime), daemon=True, name=f"upsertmat-job-{job_id}"
        )
        runtime.thread.start()

    def forget(self, job_id: str) -> None:
        """Drop a deleted job's runtime and metrics."""
        with self.lock:
            self.runtimes.pop(job_id, None)
        if self.metrics is not None:
            self.metrics.forget(job_id)

    def request_stop(self, job_id: str) -> bool:
        """Ask the job's thread to stop at its next batch boundary; False if it has none."""
        runtime = self.runtime(job_id)
        if runtime is None:
            return False
        runtime.stop.set()
        if runtime.run is not None:
            runtime.run.request_stop()
        return True

    def _run(self, job_id: str, name: str, job: JobSpec | None, runtime: JobRuntime) -> None:
        try:
            if job is None:
                record = self.registry.job(job_id)
                if record is None:
                    return
                job = self.resolver.resolve(record)
            self._follow(job_id, name, job, runtime)
            if not self.closing:
                self.quiet_transition(job_id, Event.ENDED)
                self.log(f"job {job_id} stopped")
        except _Stopped:
            if not self.closing:
                self.quiet_transition(job_id, Event.ENDED)
        except Refusal as error:
            self.quiet_transition(job_id, Event.FAILED, error=error.message)
        except _GaveUp as gave_up:
            self.quiet_transition(job_id, Event.FAILED, error=gave_up.message)
            self.log(f"job {job_id} failed: {gave_up.message}")
        except Exception as error:  # the job failed (bad data, sink down, ...): this job only
            message = concise(error)
            self.quiet_transition(job_id, Event.FAILED, error=message)
            self.log(f"job {job_id} failed: {message}")
            if not isinstance(error, SinkError | ConfigError):
                self.log("".join(traceback.format_exception(error))[-4000:])
        finally:
            runtime.done.set()

    def _follow(self, job_id: str, name: str, job: JobSpec, runtime: JobRuntime) -> None:
        """Run the job's query until it is asked to stop; a transient failure
        (:func:`~upsertmat.errors.transient_failure`) starts it again from its checkpoint after
        each of :data:`~upsertmat.errors.RETRY_WAITS` (each batch is still applied once: the sink
        skips a batch it committed), then gives up (:class:`_GaveUp`)."""
        from ..spark.pipeline import start_pipeline

        config = pipeline_config(
            job, follow=self.trigger_interval, changelog=True, query_name=f"upsertmat_{job_id}"
        ).with_progress(functools.partial(self._on_batch, job_id, runtime))
        retries = 0
        while True:
            try:
                with self.start_lock:
                    if runtime.stop.is_set():
                        raise _Stopped
                    runtime.run = start_pipeline(config, self.spark)
                    if runtime.running_since is None:
                        runtime.started()
                if runtime.stop.is_set():
                    runtime.run.request_stop()
                if not retries:
                    self.quiet_transition(job_id, Event.STARTED, clear_error=True)
                    self.log(f"job {job_id} ({name}) running")
                runtime.run.wait(functools.partial(self._poll, job_id, job, runtime))
                return
            except _Stopped:
                raise
            except Exception as error:
                reason = transient_failure(error)
                if reason is None or runtime.stop.is_set() or self.closing:
                    raise
                if retries >= len(RETRY_WAITS):
                    raise _GaveUp(
                        f"{reason}; gave up after {retries} retries from the checkpoint: restart the job"
                    ) from None
                wait = RETRY_WAITS[retries]
                retries += 1
                self.log(
                    f"job {job_id}: {reason}; retrying from its checkpoint in {wait:g} s "
                    f"(retry {retries} of {len(RETRY_WAITS)})"
                )
                if runtime.stop.wait(wait):
                    raise _Stopped from None

    def _poll(self, job_id: str, job: JobSpec, runtime: JobRuntime) -> bool:
        """The job thread's stop check (a few times a second). At most once a second it also
        counts the source rows of the batches Spark reported since (``changes_in``), and every
        :data:`WAITING_PERIOD` the files waiting (for the history). Spark's progress is read
        here rather than through a StreamingQueryListener: a Python listener kept every batch's
        query execution alive in the driver JVM (docs/gateway.md, Memory)."""
        now = time.monotonic()
        if now - runtime.waiting_counted >= WAITING_PERIOD:
            runtime.waiting_counted = now
            runtime.waiting = files_waiting(job.source.path, job.checkpoint)
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

    def quiet_transition(
        self, job_id: str, event: Event, *, error: str | None = None, clear_error: bool = False
    ) -> None:
        """A job thread's transition: one the table refuses (the job was stopped, or deleted,
        meanwhile) is logged and ignored."""
        try:
            self.registry.transition(job_id, event, error=error, clear_error=clear_error)
        except (BadTransition, KeyError) as refused:
            self.log(f"job {job_id}: {event.value} not recorded ({refused})")

    def shutdown(self, grace_seconds: float) -> None:
        """Stop every job thread at a batch boundary and wait (up to ``grace_seconds`` in all)."""
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
