"""``upsertmat bench --gateway``: a job through the gateway against the same job under ``run``,
and the latency of result pages while the job commits.

**Throughput, side by side.** The pipeline benchmark's workload (``--changes`` over ``--keys`` in
``--files`` files, VALUE, key buckets) is run ``--repetitions`` times each way, alternated (the
machine's load drifts; the order flips every round): in this process as ``upsertmat run`` runs it
(``run_job``: available-now, no changelog) and as a job submitted to an ``upsertmat gateway``
subprocess on 127.0.0.1 (continuous, recording the changelog the result modes read). Each JVM
runs a small warm-up job first. A run's seconds are the query's (start to the last batch
committed): Spark session start-up is not counted either way.

**Result pages under load.** A gateway job is fed one file per trigger interval while 8 client
threads each page the table (a new snapshot: its first page; then every further page by token)
and follow the changelog (page by token, every page asked twice as a retry would), timing every
request. A watcher asks for the job's status 20 times a second; the lag from a batch's commit
(the gateway's clock, the same machine's) to the first answer naming it is recorded.
O(changes) to write the workload.
"""

from __future__ import annotations

import functools
import json
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .pipeline import PipelineBench, bench_job, write_workload

if TYPE_CHECKING:  # httpx: the gateway extra, imported when the benchmark runs
    from ..client.http import GatewayClient

CLIENTS = 8
LOAD_SECONDS = 20.0
TRIGGER = "500 milliseconds"


@dataclass(frozen=True)
class GatewayFigures:
    """Seconds per run each way (alternated), page latencies (ms) and visibility lags (ms)."""

    changes: int
    files: int
    run_seconds: tuple[float, ...]
    gateway_seconds: tuple[float, ...]
    snapshot_page_ms: tuple[float, ...]
    table_page_ms: tuple[float, ...]
    changelog_page_ms: tuple[float, ...]
    visibility_ms: tuple[float, ...]
    trigger_ms: int
    clients: int = CLIENTS

    def ratio(self) -> float:
        """Gateway throughput / run throughput, from the medians."""
        return statistics.median(self.run_seconds) / statistics.median(self.gateway_seconds)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["ratio"] = self.ratio()
        return data


def _percentile(values: tuple[float, ...], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def report(figures: GatewayFigures) -> str:
    """The figures as text."""
    run_rate = [figures.changes / seconds for seconds in figures.run_seconds]
    gateway_rate = [figures.changes / seconds for seconds in figures.gateway_seconds]
    lines = [
        f"gateway: {figures.changes:,} changes in {figures.files} files, alternated "
        f"{len(figures.run_seconds)} x run / {len(figures.gateway_seconds)} x gateway",
        "  upsertmat run:  " + ", ".join(f"{rate:,.0f}" for rate in run_rate) + " changes/s",
        "  gateway job:    " + ", ".join(f"{rate:,.0f}" for rate in gateway_rate) + " changes/s",
        f"  gateway / run (medians): {figures.ratio():.3f} (goal: at least 0.95)",
        f"result pages, {figures.clients} clients while a job commits (ms):   p50      p99   count",
    ]
    for name, values in (
        ("table: new snapshot", figures.snapshot_page_ms),
        ("table: page by token", figures.table_page_ms),
        ("changelog page", figures.changelog_page_ms),
    ):
        lines.append(
            f"  {name:<24} {_percentile(values, 0.5):8.1f} {_percentile(values, 0.99):8.1f} {len(values):7,}"
        )
    lag = figures.visibility_ms
    lines.append(
        f"  a committed batch is visible after: p50 {_percentile(lag, 0.5):.0f} ms, max "
        f"{max(lag, default=0.0):.0f} ms (trigger interval {figures.trigger_ms} ms; {len(lag)} batches)"
    )
    return "\n".join(lines)


def _job_yaml(bench: PipelineBench, source: str, name: str) -> str:
    buckets = "null" if bench.key_buckets is None else str(bench.key_buckets)
    return (
        f"name: {name}\nsource: {{path: {source}, columns: [{{id: long}}, {{version: long}}, "
        f"{{payload: string}}], format: {bench.source_format.value}}}\nkeys: {{primary-key: [id]}}\n"
        f"sink: {{internal: true, table: bench}}\nspark: {{max-files-per-trigger: 1, key-buckets: {buckets}, "
        f"shuffle-partitions: {bench.shuffle_partitions}}}\n"
        f"config: {{table.exec.sink.upsert-materialize-strategy.type: {bench.strategy.value}}}\n"
    )


def _gateway_run(
    client: GatewayClient, session: str, bench: PipelineBench, source: str, name: str, batches: int
) -> float:
    """Submit, wait for the last batch, stop; the query's seconds (start to last commit)."""
    job = client.submit(session, job=_job_yaml(bench, source, name)).id
    while True:
        status = client.job(job)
        if status.state.value == "FAILED":
            raise RuntimeError(f"the benchmark job failed: {status.error}")
        if status.batches >= batches and status.last_batch_at and status.running_since:
            client.stop(job)
            return float((status.last_batch_at - status.running_since).total_seconds())
        time.sleep(0.2)  # the seconds come from the gateway's clock: polling more often only loads it


def run_gateway_bench(
    bench: PipelineBench,
    repetitions: int,
    tmp_root: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> GatewayFigures:
    """Both measurements; ``log`` sees a line per step."""
    from ..client.http import GatewayClient
    from ..client.launch import start_gateway
    from ..jobs.runner import run_job, start_spark

    say = log or (lambda _line: None)
    with tempfile.TemporaryDirectory(prefix="upsertmat-bench-gw-", dir=tmp_root) as name:
        directory = Path(name)
        root = directory / "root"
        source = root / "data" / "source"
        changes = write_workload(bench, source)
        warm = root / "data" / "warm"
        write_workload(replace(bench, changes=2_000, keys=200, files=1), warm)
        say(f"wrote {changes:,} changes in {bench.files} files")
        process, url = start_gateway(root, trigger_interval=TRIGGER)
        client = GatewayClient(url, timeout=120)
        try:
            session = client.open_session()
            warm_job = bench_job(directory / "run-warm", bench, warm)
            start_spark(warm_job)
            run_job(warm_job)
            _gateway_run(client, session, bench, "data/warm", "warm", 1)
            say("warmed up both JVMs")
            run_seconds: list[float] = []
            gateway_seconds: list[float] = []
            for round_ in range(repetitions):
                order = ("run", "gateway") if round_ % 2 == 0 else ("gateway", "run")
                for kind in order:
                    if kind == "run":
                        result = run_job(bench_job(directory / f"run-{round_}", bench, source))
                        run_seconds.append(result.seconds)
                        say(f"round {round_}: upsertmat run {changes / result.seconds:,.0f} changes/s")
                    else:
                        seconds = _gateway_run(
                            client, session, bench, "data/source", f"g{round_}", bench.files
                        )
                        gateway_seconds.append(seconds)
                        say(f"round {round_}: gateway job {changes / seconds:,.0f} changes/s")
            snapshot_ms, table_ms, changelog_ms, lag_ms = _under_load(client, session, bench, root, say)
        finally:
            client.close()
            process.terminate()
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                process.kill()
        return GatewayFigures(
            changes=changes,
            files=bench.files,
            run_seconds=tuple(run_seconds),
            gateway_seconds=tuple(gateway_seconds),
            snapshot_page_ms=tuple(snapshot_ms),
            table_page_ms=tuple(table_ms),
            changelog_page_ms=tuple(changelog_ms),
            visibility_ms=tuple(lag_ms),
            trigger_ms=int(TRIGGER.split()[0]),
        )


def _under_load(
    client: GatewayClient, session: str, bench: PipelineBench, root: Path, say: Callable[[str], None]
) -> tuple[list[float], list[float], list[float], list[float]]:
    """8 clients paging the table and following the changelog of a job fed one file per trigger."""
    from ..client.http import GatewayClient

    feed = root / "data" / "feed"
    small = replace(bench, changes=20_000, keys=min(bench.keys, 10_000), files=1)
    write_workload(small, feed)
    job = client.submit(session, job=_job_yaml(bench, "data/feed", "load")).id
    while client.job(job).committed_batch is None:
        time.sleep(0.1)
    snapshot_ms: list[float] = []
    table_ms: list[float] = []
    changelog_ms: list[float] = []
    seen: dict[int, float] = {}
    lock = threading.Lock()
    stop = threading.Event()
    url = client.url

    def timed(call: Callable[[], Any], into: list[float]) -> Any:
        begin = time.monotonic()
        answer = call()
        elapsed = (time.monotonic() - begin) * 1000
        with lock:
            into.append(elapsed)
        return answer

    def reader() -> None:
        own = GatewayClient(url, timeout=60)
        token: str | None = None
        try:
            while not stop.is_set():
                page = timed(lambda: own.table_page(job, page_size=500, max_rows=5_000), snapshot_ms)
                while page.next_token:
                    following = page.next_token
                    page = timed(functools.partial(own.table_page, job, following), table_ms)
                current = token
                changes = timed(functools.partial(own.changelog_page, job, current, 500), changelog_ms)
                used = changes.token
                timed(functools.partial(own.changelog_page, job, used, 500), changelog_ms)  # a retry
                token = changes.next_token
        finally:
            own.close()

    def watcher() -> None:
        own = GatewayClient(url, timeout=60)
        try:
            while not stop.is_set():
                status = own.job(job)
                now = time.time()
                batch = status.committed_batch
                if batch is not None and batch not in seen and status.last_batch_at:
                    seen[batch] = (now - status.last_batch_at.timestamp()) * 1000
                time.sleep(0.05)
        finally:
            own.close()

    threads = [threading.Thread(target=reader, daemon=True) for _ in range(CLIENTS)]
    threads.append(threading.Thread(target=watcher, daemon=True))
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + LOAD_SECONDS
    number = 0
    while time.monotonic() < deadline:
        number += 1
        records = [
            {
                "seq": 10_000_000 + number * 100 + index,
                "op": "+U",
                "id": index,
                "version": number,
                "payload": f"load-{number}",
            }
            for index in range(50)
        ]
        partial = root / "data" / f".feed-{number}.partial"
        partial.write_text("".join(json.dumps(record) + "\n" for record in records))
        partial.replace(feed / f"feed-{number:05d}.jsonl")
        time.sleep(int(TRIGGER.split()[0]) / 1000)
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    client.stop(job)
    first = min(seen) if seen else 0
    lags = [lag for batch, lag in seen.items() if batch != first]  # the first was committed before
    say(f"under load: {len(snapshot_ms)} table snapshots, {len(lags)} batches seen")
    return snapshot_ms, table_ms, changelog_ms, lags
