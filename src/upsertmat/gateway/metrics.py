"""Prometheus metrics of a gateway (``GET /metrics``, the ``prometheus-client`` library).

Per job (label ``job``, the job id): ``upsertmat_job_batches_total``, ``..._changes_in_total``
(source rows read, from Spark's progress reports, read by the job's thread),
``..._changes_out_total`` (table changes the sink applied), ``..._misses_total`` (retractions
that matched nothing), ``..._skipped_batches_total`` (batches already committed, re-run after a
restart), ``..._batch_seconds`` (a histogram of the
batch's time in the sink step, its Spark stages included), ``..._files_waiting`` (source files
not read yet), ``..._rows`` (rows in the result table), ``..._state`` (1 for the job's state).
The gateway: ``upsertmat_gateway_request_seconds`` (a histogram by method, route template and
status), ``upsertmat_gateway_snapshots``, ``..._snapshot_bytes``, ``..._readers``,
``..._malloc_arenas`` (glibc's malloc arenas of the process, bounded at start: ``malloc.py``;
absent elsewhere than glibc). Counters
count from the gateway's start. Scrapes read the registry and each sink's row count:
O(jobs + snapshots).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from ..sinks import snapshot_header
from .lifecycle import JobState
from .malloc import arena_count
from .waiting import files_waiting

if TYPE_CHECKING:
    from ..spark.config import BatchProgress
    from .service import Gateway

BATCH_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class JobMetrics:
    """The per-job instruments, fed by each job's batches (the job threads)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.batches = Counter("upsertmat_job_batches", "micro-batches committed", ["job"], registry=registry)
        self.changes_in = Counter(
            "upsertmat_job_changes_in", "source rows read by the job's batches", ["job"], registry=registry
        )
        self.changes_out = Counter(
            "upsertmat_job_changes_out", "table changes applied by the sink", ["job"], registry=registry
        )
        self.misses = Counter(
            "upsertmat_job_misses", "retractions that matched no stored row", ["job"], registry=registry
        )
        self.skipped = Counter(
            "upsertmat_job_skipped_batches",
            "batches already committed, re-run after a restart (applied once)",
            ["job"],
            registry=registry,
        )
        self.seconds = Histogram(
            "upsertmat_job_batch_seconds",
            "a batch's time in the sink step (its Spark stages included)",
            ["job"],
            buckets=BATCH_BUCKETS,
            registry=registry,
        )

    def batch(self, job_id: str, progress: BatchProgress) -> None:
        """A batch reported: committed (counted with its changes, as the job's status counts
        it), or skipped (committed before: counted as skipped only)."""
        self.seconds.labels(job_id).observe(progress.sink_seconds)
        if progress.skipped:
            self.skipped.labels(job_id).inc()
            return
        self.batches.labels(job_id).inc()
        self.changes_out.labels(job_id).inc(progress.changes)
        self.misses.labels(job_id).inc(progress.misses)

    def read(self, job_id: str, rows: int) -> None:
        self.changes_in.labels(job_id).inc(rows)

    def forget(self, job_id: str) -> None:
        """Drop a deleted job's series."""
        for instrument in (
            self.batches,
            self.changes_in,
            self.changes_out,
            self.misses,
            self.skipped,
            self.seconds,
        ):
            with contextlib.suppress(KeyError):
                instrument.remove(job_id)


class _Live(Collector):
    """What is read at scrape time: states, rows, files waiting, the registry's sizes."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway

    def collect(self) -> Iterator[Any]:
        gateway = self.gateway
        state = GaugeMetricFamily(
            "upsertmat_job_state", "1 for the job's current state", labels=["job", "state"]
        )
        rows = GaugeMetricFamily("upsertmat_job_rows", "rows in the job's result table", labels=["job"])
        waiting = GaugeMetricFamily(
            "upsertmat_job_files_waiting", "source files the job has not read yet", labels=["job"]
        )
        for record in gateway.registry.jobs():
            for candidate in JobState:
                if candidate is not JobState.DELETED:
                    state.add_metric(
                        [record.id, candidate.value], 1.0 if record.state == candidate.value else 0.0
                    )
            try:
                job = gateway.resolve(record)
            except Exception:  # a job that no longer resolves has no table to count
                continue
            snapshot = snapshot_header(job.sink.url, job.sink.table, job.primary_key)
            rows.add_metric([record.id], float(0 if snapshot is None else snapshot.total))
            waiting.add_metric([record.id], float(files_waiting(job.source.path, job.checkpoint)))
        yield state
        yield rows
        yield waiting
        count, used = gateway.registry.snapshot_usage()
        yield GaugeMetricFamily("upsertmat_gateway_snapshots", "table snapshots held", value=float(count))
        yield GaugeMetricFamily(
            "upsertmat_gateway_snapshot_bytes", "bytes of the table snapshots' pages", value=float(used)
        )
        yield GaugeMetricFamily(
            "upsertmat_gateway_readers",
            "changelog readers held",
            value=float(gateway.registry.cursor_count()),
        )
        arenas = arena_count()
        if arenas is not None:
            yield GaugeMetricFamily(
                "upsertmat_gateway_malloc_arenas",
                "glibc malloc arenas of the gateway's process",
                value=float(arenas),
            )


class GatewayMetrics:
    """The gateway's metrics registry: request latencies, per-job instruments, live gauges."""

    def __init__(self, gateway: Gateway) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "upsertmat_gateway_request_seconds",
            "time to answer a request",
            ["method", "route", "status"],
            buckets=REQUEST_BUCKETS,
            registry=self.registry,
        )
        gateway.metrics = JobMetrics(self.registry)
        self.registry.register(_Live(gateway))

    def request(self, method: str, route: str, status: int, begin: float) -> None:
        self.requests.labels(method, route, str(status)).observe(time.perf_counter() - begin)

    def render(self, accept: str) -> tuple[bytes, str]:
        """The exposition (text format, or OpenMetrics when ``accept`` asks for it) and its
        content type."""
        encoder, content_type = choose_encoder(accept)
        return encoder(self.registry), content_type
