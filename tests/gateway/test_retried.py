"""What a gateway job's status counts when its query was retried (issue 45, item 6): the batches
and changes the job committed in this process over every attempt, never a batch twice. A batch
that an attempt committed and the next one runs again (the sink skips it: its id is committed)
adds nothing. No Spark: the job thread's loop runs on a stand-in query that reports batches and
fails as Spark does (the transient failure's own words); the resumed jobs' line has its plural."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from upsertmat.errors import TRANSIENT_SIGNS
from upsertmat.gateway import runtime as runtime_module
from upsertmat.gateway.lifecycle import Event
from upsertmat.gateway.registry import Registry
from upsertmat.gateway.runtime import JobRuntime, JobThreads
from upsertmat.gateway.server import resumed_line
from upsertmat.spark.config import BatchProgress


def progress(batch: int, changes: int, skipped: bool = False) -> BatchProgress:
    return BatchProgress(batch, changes, changes, 0, skipped, 0.01, 1.0)


class Attempt:
    """One start of the query: reports its batches, then fails (transiently) or ends."""

    def __init__(self, batches: list[BatchProgress], report: Callable[[BatchProgress], None], fails: bool):
        self.batches, self.report, self.fails = batches, report, fails
        self.query: Any = None

    def wait(self, poll: Callable[[], bool]) -> None:
        for batch in self.batches:
            self.report(batch)
        if self.fails:
            raise RuntimeError(f"org.apache.spark.SparkException: {TRANSIENT_SIGNS[0]}")

    def request_stop(self) -> None:
        pass


class Config:
    def __init__(self) -> None:
        self.report: Callable[[BatchProgress], None] = lambda batch: None

    def with_progress(self, report: Callable[[BatchProgress], None]) -> Config:
        self.report = report
        return self


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    found = Registry(tmp_path)
    yield found
    found.close()


def test_a_retried_jobs_counts_span_every_attempt_once(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    import upsertmat.spark.pipeline as pipeline

    config = Config()
    attempts = iter(
        [
            [progress(0, 5), progress(1, 7)],  # then the Python worker does not connect back
            [progress(1, 7, skipped=True), progress(2, 3)],  # batch 1 again: committed already
        ]
    )
    started: list[Attempt] = []

    def start(given: Config, spark: object) -> Attempt:
        batches = next(attempts)
        started.append(Attempt(batches, given.report, fails=len(started) == 0))
        return started[-1]

    monkeypatch.setattr(runtime_module, "pipeline_config", lambda *a, **k: config)
    monkeypatch.setattr(runtime_module, "RETRY_WAITS", (0.0, 0.0, 0.0))
    monkeypatch.setattr(pipeline, "start_pipeline", start)
    logged: list[str] = []
    threads = JobThreads(registry, None, None, "1 second", threading.RLock(), logged.append)  # type: ignore[arg-type]
    from prometheus_client import CollectorRegistry

    from upsertmat.gateway.metrics import JobMetrics

    collected = CollectorRegistry()
    threads.metrics = JobMetrics(collected)
    registry.add_job("s-1", "retried", "job", "{}", {}, "j-0000000001")
    registry.transition("j-0000000001", Event.STARTED)
    job = JobRuntime()
    threads._follow("j-0000000001", "retried", object(), job)  # type: ignore[arg-type]
    assert len(started) == 2 and any("retry 1 of 3" in line for line in logged), logged
    assert (job.batches, job.changes) == (3, 15)  # batches 0, 1 and 2; batch 1's 7 changes once
    assert [point.batch_id for point in job.history] == [0, 1, 2]
    assert job.last_batch == 2
    label = {"job": "j-0000000001"}
    assert collected.get_sample_value("upsertmat_job_batches_total", label) == 3  # as the status
    assert collected.get_sample_value("upsertmat_job_changes_out_total", label) == 15
    assert collected.get_sample_value("upsertmat_job_skipped_batches_total", label) == 1


def test_the_resumed_jobs_line_has_its_plural() -> None:
    assert resumed_line(["j-1"]) == "resumed 1 job on its checkpoint: j-1"
    assert resumed_line(["j-1", "j-2"]) == "resumed 2 jobs on their checkpoints: j-1, j-2"
