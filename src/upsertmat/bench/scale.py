"""``upsertmat bench --pipeline --table-sizes N,N,...``: what one micro-batch costs as the table grows.

For each table size (live sink keys) the pipeline first *loads* the table — every key inserted,
:attr:`ScaleBench.load_batch` keys per micro-batch, untimed — and then runs
:attr:`ScaleBench.batches` *measured* micro-batches of :attr:`ScaleBench.batch_changes` changes
each: ``-U old`` / ``+U new`` pairs of uniformly random keys (the live keys stay the table size).
The same job runs twice per size, matching whole rows and with the upsert key ``id``, each on a
checkpoint and sink of its own; every sink kind asked for is one more pair of runs.

Per measured batch, from the pipeline's own reports (:class:`~upsertmat.spark.config.BatchProgress`,
Spark's progress report) and the processes: the batch's time (Spark's ``triggerExecution``); the
materializer's state access — calls to Spark's state server, bytes read and written (as stored),
seconds in state access summed over tasks; the sink's transaction time and the bytes the driver
wrote to storage meanwhile (``/proc/self/io`` ``write_bytes``: the sink's files; with the driver
applying every batch, nothing else writes there); the driver's CPU seconds (``getrusage``: the
Python process that collects the batch and runs the sink) and the JVM's (``/proc/PID/stat``).
Peak RSS of driver, JVM and Python workers per run (:class:`~.footprint.RssSampler`). After the
measured batches the sink table is compared with an independent model of the workload (a
digest of every row), so a fast wrong run is caught. An untimed run of 20,000 keys comes first
(the session's JIT, code generation and Python workers would otherwise land on the first size).

Nothing is extrapolated: a size that was not run is not in the result. Cost: the load is
O(size) per run (about 40,000-100,000 keys/s on 2 cores); disk: the state store and the sink,
~0.3-1 KB per key.
"""

from __future__ import annotations

import hashlib
import json
import random
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from ..impls.settings import Backend, Settings, Strategy
from ..jobs.model import Column, JobSpec, SinkSpec, SourceFormat, SourceSpec, SparkOptions
from ..sinks import kind_named, kind_of
from .footprint import RssSampler, jvm_cpu_seconds
from .pipeline import libraries_line, library_versions

COLUMNS = (Column("id", "long"), Column("version", "long"), Column("payload", "string"))
WARM_UP_KEYS = 20_000
"""Keys of the untimed first run of a sweep (JIT, code generation, Python workers)."""
PAYLOAD = 24
"""Characters of the payload column (rows of ~40 bytes, as ``bench --pipeline``'s)."""


@dataclass(frozen=True)
class ScaleBench:
    """What to run (see the module): sizes in live keys, the measured batches, the sinks."""

    sizes: tuple[int, ...] = (100_000, 1_000_000, 10_000_000)
    batch_changes: int = 100_000
    batches: int = 3
    load_batch: int = 1_000_000
    sinks: tuple[str, ...] = ("sqlite",)
    key_buckets: int | None = 256
    shuffle_partitions: int = 2
    strategy: Strategy = Strategy.VALUE
    keyed: tuple[bool, ...] = (False, True)
    seed: int = 0
    state_layout: str = "log"
    state_inline_bytes: int = SparkOptions.state_inline_bytes
    server_urls: tuple[tuple[str, str], ...] = ()
    """``(kind, URL)`` of the sinks that live on a server (``postgresql``): each run writes a table
    of its own there and drops it afterwards."""


@dataclass(frozen=True)
class BatchCost:
    """One measured micro-batch (seconds, bytes, calls)."""

    batch_id: int
    changes: int
    batch_seconds: float
    state_calls: int
    state_bytes_read: int
    state_bytes_written: int
    state_seconds: float
    sink_seconds: float
    sink_bytes_written: int
    driver_cpu_seconds: float
    jvm_cpu_seconds: float


@dataclass(frozen=True)
class ScaleRun:
    """One table size, sink and matching mode: its load, its measured batches, its memory."""

    size: int
    sink: str
    upsert_key: bool
    load_seconds: float
    batches: tuple[BatchCost, ...]
    peak_rss_mb: dict[str, float]
    table_matches_model: bool
    rows: int
    state_store_bytes: int
    sink_disk_bytes: int

    def median(self, name: str) -> float:
        """The median over the measured batches of :class:`BatchCost` field ``name``."""
        return float(statistics.median(getattr(batch, name) for batch in self.batches))


@dataclass
class ScaleFigures:
    """Every run of the sweep, in the order run."""

    bench: ScaleBench
    runs: list[ScaleRun] = field(default_factory=list)
    libraries: dict[str, str] = field(default_factory=library_versions)
    """The versions of pyspark, pyarrow, msgpack and numpy the sweep ran with."""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures, with each run's medians."""
        bench = asdict(self.bench)
        bench["strategy"] = self.bench.strategy.value
        runs = []
        for run in self.runs:
            data = asdict(run)
            data["medians"] = {name: run.median(name) for name in _MEDIANS}
            runs.append(data)
        return {"bench": bench, "libraries": self.libraries, "runs": runs}


_MEDIANS = (
    "batch_seconds",
    "state_calls",
    "state_bytes_read",
    "state_bytes_written",
    "state_seconds",
    "sink_seconds",
    "sink_bytes_written",
    "driver_cpu_seconds",
    "jvm_cpu_seconds",
)


def _row(key: int, version: int) -> dict[str, Any]:
    return {"id": key, "version": version, "payload": f"{version:08d}-{key:015d}"[:PAYLOAD]}


def workload(size: int, bench: ScaleBench) -> Iterator[list[dict[str, Any]]]:
    """The source files in order: the load (``+I`` of every key, ``load_batch`` per file), then
    ``batches`` files of ``batch_changes`` changes (``-U``/``+U`` pairs of random keys). Each
    record is ``{seq, op, id, version, payload}``. O(size + batches x batch_changes)."""
    seq = 0
    for start in range(0, size, bench.load_batch):
        records = []
        for key in range(start, min(start + bench.load_batch, size)):
            records.append({"seq": seq, "op": "+I", **_row(key, 0)})
            seq += 1
        yield records
    rng = random.Random(bench.seed)
    versions: dict[int, int] = {}
    for _ in range(bench.batches):
        records = []
        for _ in range(bench.batch_changes // 2):
            key = rng.randrange(size)
            old = versions.get(key, 0)
            versions[key] = old + 1
            records.append({"seq": seq, "op": "-U", **_row(key, old)})
            records.append({"seq": seq + 1, "op": "+U", **_row(key, old + 1)})
            seq += 2
        yield records


def model_digest(size: int, bench: ScaleBench) -> tuple[int, str]:
    """(rows, digest) of the table the workload leaves: every key at its last version. The
    digest is order-independent (the sum of each row's BLAKE2b, mod 2**128). O(size)."""
    rng = random.Random(bench.seed)
    versions: dict[int, int] = {}
    for _ in range(bench.batches):
        for _ in range(bench.batch_changes // 2):
            key = rng.randrange(size)
            versions[key] = versions.get(key, 0) + 1
    total = 0
    for key in range(size):
        row = _row(key, versions.get(key, 0))
        total += _row_hash((row["id"], row["version"], row["payload"]))
    return size, f"{total % 2**128:032x}"


def _row_hash(row: tuple[Any, ...]) -> int:
    return int.from_bytes(hashlib.blake2b(json.dumps(list(row)).encode(), digest_size=16).digest(), "big")


def table_digest(url: str, table: str) -> tuple[int, str]:
    """(rows, digest) of the sink table as its kind reads it (the digest of :func:`model_digest`)."""
    snapshot = kind_of(url).snapshot(url, table, ["id"])
    total = sum(_row_hash(tuple(row)) for row in snapshot.rows)
    return snapshot.total, f"{total % 2**128:032x}"


def _write(directory: Path, index: int, records: list[dict[str, Any]]) -> None:
    with (directory / f"changes-{index:05d}.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(record) + "\n" for record in records)


def scale_job(directory: Path, source: Path, bench: ScaleBench, sink: str, upsert_key: bool) -> JobSpec:
    """The job of one run: its checkpoint and sink in ``directory`` (or a table of its own on the
    sink's server, :attr:`ScaleBench.server_urls`), one file per micro-batch."""
    servers = dict(bench.server_urls)
    if sink in servers:
        spec = SinkSpec(url=servers[sink], table=f"scale_{directory.name.replace('-', '_')}")
    else:
        spec = SinkSpec(url=kind_named(sink).url_in(directory, "scale"), table="scale")
    return JobSpec(
        name="scale",
        source=SourceSpec(source, SourceFormat.JSONL, COLUMNS),
        sink=spec,
        primary_key=("id",),
        upsert_key=("id",) if upsert_key else (),
        checkpoint=directory / "checkpoint",
        settings=replace(Settings(), strategy=bench.strategy, backend=Backend.SPARK),
        spark=SparkOptions(
            master="local[2]",
            shuffle_partitions=bench.shuffle_partitions,
            max_files_per_trigger=1,
            key_buckets=bench.key_buckets,
            state_layout=bench.state_layout,
            state_inline_bytes=bench.state_inline_bytes,
        ),
    )


def _written_bytes() -> int:
    """Bytes this process caused to be written to storage so far (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/io", encoding="ascii") as io:
            for line in io:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _driver_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _bytes_under(path: Path | None) -> int:
    if path is None or not path.exists():
        return 0
    if path.is_file():
        return sum(item.stat().st_size for item in path.parent.glob(f"{path.name}*") if item.is_file())
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


def run_one(
    bench: ScaleBench, size: int, sink: str, upsert_key: bool, root: Path, say: Callable[[str], None]
) -> ScaleRun:
    """Load a table of ``size`` keys, run the measured batches, check the table (see the module)."""
    from ..jobs.runner import run_job
    from ..spark.config import BatchProgress

    directory = Path(tempfile.mkdtemp(prefix=f"scale-{size}-{sink}-", dir=root))
    source = directory / "source"
    source.mkdir()
    files = 0
    for index, records in enumerate(workload(size, bench)):
        _write(source, index, records)
        files += 1
    load_files = files - bench.batches
    job = scale_job(directory, source, bench, sink, upsert_key)
    marks: list[tuple[float, float, int, float]] = []  # (wall, driver cpu, written, jvm cpu) per batch end
    reports: list[BatchProgress] = []

    def progress(batch: BatchProgress) -> None:
        marks.append((time.monotonic(), _driver_cpu_seconds(), _written_bytes(), jvm_cpu_seconds()))
        reports.append(batch)
        if batch.batch_id == load_files - 1 or batch.batch_id >= load_files:
            mode = "upsert key" if upsert_key else "whole rows"
            say(
                f"{size:,} keys, {sink}, {mode}: batch {batch.batch_id} ({batch.changes:,} changes) "
                f"sink {batch.write_seconds:.2f} s, state {batch.state_bytes_read:,} B read / "
                f"{batch.state_bytes_written:,} B written"
            )

    started = time.monotonic()
    marks.append((started, _driver_cpu_seconds(), _written_bytes(), jvm_cpu_seconds()))
    with RssSampler() as rss:
        result = run_job(job, progress)
    timings = {timing.batch_id: timing for timing in result.timings}
    costs = []
    for index, batch in enumerate(reports):
        if batch.batch_id < load_files:
            continue
        before, after = marks[index], marks[index + 1]
        timing = timings.get(batch.batch_id)
        costs.append(
            BatchCost(
                batch_id=batch.batch_id,
                changes=batch.changes,
                batch_seconds=(timing.total_ms / 1000) if timing is not None else after[0] - before[0],
                state_calls=batch.state_calls,
                state_bytes_read=batch.state_bytes_read,
                state_bytes_written=batch.state_bytes_written,
                state_seconds=batch.state_seconds,
                sink_seconds=batch.write_seconds,
                sink_bytes_written=after[2] - before[2],
                driver_cpu_seconds=after[1] - before[1],
                jvm_cpu_seconds=after[3] - before[3],
            )
        )
    load_seconds = marks[load_files][0] - started if len(marks) > load_files else 0.0
    expected = model_digest(size, bench)
    found = table_digest(job.sink.url, job.sink.table)
    local = job.sink.kind.local_path(job.sink.url)
    if local is None:  # a table on a server: gone with the run, as the run's files are
        job.sink.kind.drop(job.sink.url, job.sink.table)
    return ScaleRun(
        size=size,
        sink=sink,
        upsert_key=upsert_key,
        load_seconds=load_seconds,
        batches=tuple(costs),
        peak_rss_mb={role: round(peak / 2**20, 1) for role, peak in rss.peaks.items()},
        table_matches_model=found == expected,
        rows=found[0],
        state_store_bytes=_bytes_under(job.checkpoint / "state"),
        sink_disk_bytes=_bytes_under(local),
    )


def run_scale(
    bench: ScaleBench,
    tmp_root: Path | None = None,
    log: Callable[[str], None] | None = None,
    keep: Callable[[ScaleFigures], None] | None = None,
) -> ScaleFigures:
    """Every size x sink x matching mode, smallest size first; ``keep`` sees the figures after
    every run (a long sweep that is stopped keeps what it measured). Each run's files are
    removed when it ends."""
    import shutil

    from ..jobs.runner import require_pyspark

    require_pyspark()
    say = log or (lambda _line: None)
    figures = ScaleFigures(bench)
    root = Path(tempfile.mkdtemp(prefix="upsertmat-scale-", dir=tmp_root))
    try:
        # Untimed: the session's first query pays the JVM's JIT, code generation and the Python
        # workers' start, which would land on the smallest size's batches.
        warm = replace(bench, batch_changes=min(bench.batch_changes, 20_000), batches=2)
        run_one(warm, min(WARM_UP_KEYS, min(bench.sizes)), bench.sinks[0], False, root, lambda _line: None)
        shutil.rmtree(next(root.iterdir()), ignore_errors=True)
        say("warm-up run done (untimed)")
        for size in sorted(bench.sizes):
            for sink in bench.sinks:
                for keyed in bench.keyed:
                    run = run_one(bench, size, sink, keyed, root, say)
                    figures.runs.append(run)
                    if keep is not None:
                        keep(figures)
                    for child in root.iterdir():
                        shutil.rmtree(child, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return figures


def report(figures: ScaleFigures) -> str:
    """One line per run: medians per measured batch, and the ratio to the smallest size."""
    lines = [
        f"scale: batches of {figures.bench.batch_changes:,} changes of random keys, "
        f"{figures.bench.batches} measured per run, key buckets {figures.bench.key_buckets} "
        f"({figures.bench.state_layout} layout), "
        f"strategy {figures.bench.strategy.value}, local[2]",
        "  " + libraries_line(figures.libraries),
    ]
    smallest: dict[tuple[str, bool], float] = {}
    for run in figures.runs:
        batch = run.median("batch_seconds")
        smallest.setdefault((run.sink, run.upsert_key), batch)
        ratio = batch / smallest[(run.sink, run.upsert_key)] if smallest[(run.sink, run.upsert_key)] else 0.0
        read, written = run.median("state_bytes_read") / 2**20, run.median("state_bytes_written") / 2**20
        mode = "keyed" if run.upsert_key else "rows "
        lines.append(
            f"  {run.size:>11,} keys {run.sink:<8} {mode}: batch {batch:6.2f} s ({ratio:.2f}x), "
            f"state {run.median('state_seconds'):5.2f} s {read:7.1f} MiB read {written:7.1f} MiB written "
            f"{run.median('state_calls'):,.0f} calls, sink {run.median('sink_seconds'):5.2f} s "
            f"{run.median('sink_bytes_written') / 2**20:6.1f} MiB, driver CPU "
            f"{run.median('driver_cpu_seconds'):5.2f} s, JVM CPU {run.median('jvm_cpu_seconds'):5.2f} s; "
            f"table {'= model' if run.table_matches_model else 'DIFFERS from the model'}"
        )
    return "\n".join(lines)
