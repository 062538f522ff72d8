"""``upsertmat bench --pipeline``: end-to-end throughput of the PySpark pipeline, and where the time goes.

Workload (:func:`write_workload`): ``changes`` changes over ``keys`` sink keys, a realistic
upsert changelog in logical order: every key is inserted (``+I``), then random keys are updated
as ``-U old``/``+U new`` pairs (rows ``(id, version, payload)``), split into ``files`` JSON
Lines files (one micro-batch each when ``files_per_batch`` is 1).

Three timed runs on one local Spark session (``local[2]``), each on its own checkpoint, after an
untimed warm-up (a 2,000-change source read and noop run: JIT, code generation, Python workers):

1. *source*: a batch read of the same files that parses every column (``sum(hash(*))``);
2. *materializer*: the pipeline's query (source -> ``groupBy`` key bucket or pk -> the
   materializer, ``transformWithState``) into Spark's ``noop`` sink (available-now);
3. *end to end*: the real pipeline (:mod:`upsertmat.spark.pipeline`) into SQLite.

Stage times: source = run 1; shuffle + materializer = run 2 - run 1; sink = run 3 - run 2 (also
reported: the sink's own timer, which includes computing the batch because Spark is lazy).
Throughput = changes / seconds. Session start-up is excluded and reported separately.

Matching modes: runs 2 and 3 match whole rows (``upsert-key: []``, as the shipped example job
and every sink without an upsert key do); run 4 is run 3 again on a fresh checkpoint and sink
with the upsert key ``id`` (:data:`KEYED`), reported next to it. Memory: the peak RSS of the
driver's Python process, of Spark's JVM and of the Python workers (summed per sample), sampled
every 0.2 s over the whole benchmark, the process tree re-read every second
(:class:`~.footprint.RssSampler`).

Per micro-batch (run 3, Spark's progress reports): the batch's time (min / median / max), its
parts outside running the batch (source listing, planning, offsets and commit logs), the state
store commit and the sink transaction. *Fixed cost per batch*: after run 3, ``FIXED_BATCHES``
one-change files are added and the same query continues on its checkpoint (state loaded),
one micro-batch each; the median batch time of all but the first (which also starts the query:
planning, Python workers) is what a batch costs regardless of its size
(planning, logs, state store load and commit, Python worker round trips, one bucket's blob
rewritten, the sink transaction). Reported next to the median batch of run 3.
"""

from __future__ import annotations

import importlib.metadata
import itertools
import json
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ..impls.settings import Backend, Settings, Strategy
from ..jobs.model import Column, JobSpec, SinkSpec, SourceFormat, SourceSpec, SparkOptions
from ..sinks import KINDS, kind_named
from ..spark.sources.formats import pipeline_name
from .footprint import RssSampler

COLUMNS = (Column("id", "long"), Column("version", "long"), Column("payload", "string"))
GOAL_CHANGES_PER_SECOND = 50_000.0
FIXED_BATCHES = 4  # one-change micro-batches after the timed runs (the first, a query start, is not counted)
# Spark groups the benchmark's state into this many hash buckets of sink keys by default: each
# Spark grouping key costs ~0.3 ms per batch in the Python worker, so 100,000 keys cost ~30 s of
# it, 256 buckets ~0.1 s; a bucket's state is one blob read and written once per batch
# (docs/benchmarks.md, Pipeline).
DEFAULT_KEY_BUCKETS = 256
KEYED = ("id",)
"""The upsert key of the keyed end-to-end run (run 4; runs 2 and 3 match whole rows)."""


@dataclass(frozen=True)
class PipelineBench:
    """What to run: workload size and shape, strategy, files and micro-batches."""

    changes: int = 1_000_000
    keys: int = 100_000
    files: int = 1
    strategy: Strategy = Strategy.VALUE
    payload_size: int = 20
    seed: int = 0
    source_format: SourceFormat = SourceFormat.JSONL
    key_buckets: int | None = DEFAULT_KEY_BUCKETS
    shuffle_partitions: int = 2
    sink: str = "sqlite"  # a kind of SINKS
    state_layout: str = "log"  # with key buckets: log or blob (docs/spark.md, State at table scale)
    state_inline_bytes: int = SparkOptions.state_inline_bytes  # with log: the inline bound


SINKS = tuple(kind.name for kind in KINDS if kind.local)
"""The sink kinds the benchmark can make in its directory (every kind but a database server)."""

SERVER_SINKS = tuple(kind.name for kind in KINDS if not kind.local)
"""The sink kinds on a database server (PostgreSQL): the scale sweep writes to one at a URL it is
given (``--postgres-url``)."""


def sink_url(directory: Path, sink: str, suffix: str = "") -> str:
    """The benchmark's sink in ``directory``: a SQLite file, a Delta table, an Iceberg
    warehouse, ... (``suffix`` names a second one: the keyed run's)."""
    return kind_named(sink).url_in(directory, f"bench{suffix}")


def sink_bytes(directory: Path, sink: str) -> int:
    """Bytes of every file the sink has written (nothing is deleted during the run): the table's
    directory, or the database file with its journals."""
    local = kind_named(sink).local_path(sink_url(directory, sink))
    if local is None:
        return 0
    if local.is_dir():
        return sum(path.stat().st_size for path in local.rglob("*") if path.is_file())
    return sum(path.stat().st_size for path in local.parent.glob(f"{local.name}*") if path.is_file())


@dataclass(frozen=True)
class PipelineFigures:
    """Measured seconds and throughputs of one benchmark."""

    changes: int
    keys: int
    files: int
    strategy: str
    source_format: str
    session_seconds: float
    write_seconds: float
    source_seconds: float
    materializer_run_seconds: float
    end_to_end_seconds: float
    sink_timer_seconds: float
    batches: int
    key_buckets: int | None = None
    shuffle_partitions: int = 2
    batch_ms: tuple[int, ...] = ()
    outside_batch_ms: tuple[int, ...] = ()
    state_commit_ms: tuple[int, ...] = ()
    sink_write_ms: tuple[int, ...] = ()
    fixed_batch_ms: tuple[int, ...] = ()
    keyed_end_to_end_seconds: float | None = None
    """Run 4: the end-to-end run with the upsert key :data:`KEYED` (None: not run)."""
    peak_rss_mb: dict[str, float] | None = None
    """Peak RSS in MiB of ``driver`` (the Python process), ``jvm`` and ``workers``."""
    sink: str = "sqlite"
    sink_bytes: int = 0
    """Bytes of the files the sink wrote in the end-to-end run (with ``--pipeline-sink``)."""
    libraries: dict[str, str] | None = None
    """Versions of the libraries the figures depend on (:func:`library_versions`): two builds
    compared side by side must name them, an install's pins can move them (pypaimon 2.1 pins
    pyarrow below 20, whose column conversion is ~7x slower)."""

    @property
    def end_to_end_rate(self) -> float:
        """Changes per second through the whole pipeline (whole-row matching)."""
        return self.changes / self.end_to_end_seconds

    @property
    def keyed_rate(self) -> float | None:
        """Changes per second through the whole pipeline with the upsert key (run 4)."""
        return None if not self.keyed_end_to_end_seconds else self.changes / self.keyed_end_to_end_seconds

    def stages(self) -> dict[str, float]:
        """Seconds per stage: the source read; the noop run minus the source read; the sink's
        transactions as the sink timed them (without per-batch timings: the end-to-end run
        minus the noop run, which two runs' noise can bring to ~0). Never negative."""
        if self.sink_write_ms:
            sink = sum(self.sink_write_ms) / 1000
        else:
            sink = max(self.end_to_end_seconds - self.materializer_run_seconds, 0.0)
        return {
            "source read": self.source_seconds,
            "shuffle + materializer": max(self.materializer_run_seconds - self.source_seconds, 0.0),
            "sink write": sink,
        }

    @property
    def fixed_cost_ms(self) -> float | None:
        """Median time of a one-change micro-batch on the run's checkpoint (None: not measured)."""
        return statistics.median(self.fixed_batch_ms) if self.fixed_batch_ms else None

    def batch_summary(self) -> dict[str, dict[str, float]]:
        """The min / median / max milliseconds of every per-batch series that was measured."""
        series = {
            "batch": self.batch_ms,
            "outside running the batch": self.outside_batch_ms,
            "state store commit": self.state_commit_ms,
            "sink transaction": self.sink_write_ms,
            "fixed (one-change batch)": self.fixed_batch_ms,
        }
        return {
            name: {"min": min(values), "median": statistics.median(values), "max": max(values)}
            for name, values in series.items()
            if values
        }

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready figures with the derived rates."""
        data = asdict(self)
        data["per_batch_ms"] = self.batch_summary()
        data["fixed_cost_ms"] = self.fixed_cost_ms
        data["end_to_end_changes_per_second"] = self.end_to_end_rate
        data["keyed_end_to_end_changes_per_second"] = self.keyed_rate
        data["stages_seconds"] = self.stages()
        data["goal_changes_per_second"] = GOAL_CHANGES_PER_SECOND
        data["ratio_to_goal"] = self.end_to_end_rate / GOAL_CHANGES_PER_SECOND
        return data


def changelog_records(bench: PipelineBench) -> Iterator[dict[str, Any]]:
    """The workload's changes in logical order, each ``{seq, op, id, version, payload}``: every
    key inserted, then ``-U`` / ``+U`` pairs of random keys (``bench.seed``); ``seq`` counts from
    0. At most ``bench.changes`` (one less when a pair would not fit). O(changes)."""
    rng = random.Random(bench.seed)
    version = [0] * bench.keys
    pad = "x" * max(bench.payload_size - 8, 0)
    seqs = itertools.count()

    def record(op: str, key: int) -> dict[str, Any]:
        payload = f"{version[key]:08d}{pad}"
        return {"seq": next(seqs), "op": op, "id": key, "version": version[key], "payload": payload}

    for key in range(min(bench.keys, bench.changes)):
        yield record("+I", key)
    written = min(bench.keys, bench.changes)
    while written + 2 <= bench.changes:
        key = rng.randrange(bench.keys)
        yield record("-U", key)
        version[key] += 1
        yield record("+U", key)
        written += 2


def changelog_files(bench: PipelineBench) -> Iterator[list[dict[str, Any]]]:
    """:func:`changelog_records` cut into the benchmark's source files, in order: ``ceil(changes
    / files)`` records each, the last one shorter (fewer files when the changelog is short).
    O(changes)."""
    per_file = -(-bench.changes // bench.files)
    records: list[dict[str, Any]] = []
    for record in changelog_records(bench):
        records.append(record)
        if len(records) == per_file:
            yield records
            records = []
    if records:
        yield records


def write_workload(bench: PipelineBench, directory: Path) -> int:
    """Write the changelog (:func:`changelog_files`) as ``bench.files`` JSON Lines or Parquet
    files; return the count. O(changes)."""
    directory.mkdir(parents=True, exist_ok=True)
    written = 0
    for index, records in enumerate(changelog_files(bench)):
        _write_file(directory, index, records, bench.source_format)
        written += len(records)
    return written


def _write_file(
    directory: Path, index: int, records: list[dict[str, Any]], source_format: SourceFormat
) -> None:
    if source_format is SourceFormat.PARQUET:
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        pq.write_table(pa.Table.from_pylist(records), directory / f"changes-{index:04d}.parquet")
        return
    with (directory / f"changes-{index:04d}.jsonl").open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(record) + "\n" for record in records)


def bench_job(
    directory: Path, bench: PipelineBench, source: Path, upsert_key: tuple[str, ...] = ()
) -> JobSpec:
    """The end-to-end job of the benchmark (its sink in ``directory``): whole-row matching,
    or with ``upsert_key`` (then on a checkpoint and sink table of its own)."""
    suffix = "-keyed" if upsert_key else ""
    return JobSpec(
        name="bench" + suffix,
        source=SourceSpec(source, bench.source_format, COLUMNS),
        sink=SinkSpec(url=sink_url(directory, bench.sink, suffix), table="bench"),
        primary_key=("id",),
        upsert_key=upsert_key,
        checkpoint=directory / f"checkpoint{suffix}",
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


def run_pipeline_bench(
    bench: PipelineBench, tmp_root: Path | None = None, log: Callable[[str], None] | None = None
) -> PipelineFigures:
    """Run the three timed runs; ``log`` sees one line per step."""
    from ..jobs.runner import pipeline_config, require_pyspark, run_job

    require_pyspark()
    from ..spark.pipeline import build_query_frame, column_types, resolve_layout
    from ..spark.session import build_session
    from ..spark.sources import read_changelog

    say = log or (lambda _line: None)
    with RssSampler() as rss, tempfile.TemporaryDirectory(prefix="upsertmat-bench-", dir=tmp_root) as name:
        directory = Path(name)
        source = directory / "source"
        started = time.monotonic()
        changes = write_workload(bench, source)
        write_seconds = time.monotonic() - started
        say(f"wrote {changes:,} changes, {bench.keys:,} keys, {bench.files} file(s): {write_seconds:.1f} s")
        started = time.monotonic()
        spark = build_session(master="local[2]", shuffle_partitions=bench.shuffle_partitions)
        session_seconds = time.monotonic() - started
        job = bench_job(directory, bench, source)
        config = pipeline_config(job)

        fmt, schema = (
            pipeline_name(config.source.format),
            config.source.ddl(),
        )  # Spark's reader: json, parquet

        def read_source(path: Path) -> None:
            spark.read.schema(schema).format(fmt).load(str(path)).selectExpr("sum(hash(*))").collect()

        def noop_run(path: Path, checkpoint: Path) -> None:
            """The pipeline's query (grouping, processor, time mode) into Spark's noop sink."""
            stream = read_changelog(spark, replace(config, source=replace(config.source, path=path)))
            layout = resolve_layout(config, column_types(stream))
            out, _decode, _time_mode = build_query_frame(config, stream, layout)
            writer = out.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
            writer.trigger(availableNow=True).start().awaitTermination()

        # Warm-up (untimed): the first query of a JVM pays JIT and code generation, the first
        # stateful query its Python workers; without this, run 2 would carry them.
        warm = directory / "warm-up"
        write_workload(replace(bench, changes=2_000, keys=200, files=1), warm)
        read_source(warm)
        noop_run(warm, directory / "checkpoint-warm-up")

        started = time.monotonic()
        read_source(source)
        source_seconds = time.monotonic() - started
        say(f"source read: {source_seconds:.1f} s")

        started = time.monotonic()
        noop_run(source, directory / "checkpoint-noop")
        materializer_seconds = time.monotonic() - started
        say(f"source + shuffle + materializer (noop sink): {materializer_seconds:.1f} s")

        started = time.monotonic()
        result = run_job(job)
        end_to_end = time.monotonic() - started
        say(f"end to end into {bench.sink}: {end_to_end:.1f} s ({len(result.batches)} micro-batches)")
        written = sink_bytes(directory, bench.sink)
        fixed = fixed_cost_batches(job, source, changes)
        say(f"fixed cost: {len(fixed)} one-change micro-batches, median {statistics.median(fixed):.0f} ms")
        started = time.monotonic()
        keyed = run_job(bench_job(directory, bench, source, KEYED))
        keyed_seconds = time.monotonic() - started
        key = ",".join(KEYED)
        say(f"end to end with upsert key {key}: {keyed_seconds:.1f} s ({len(keyed.batches)} micro-batches)")
        rss.sample()
        return PipelineFigures(
            changes=changes,
            keys=bench.keys,
            files=bench.files,
            strategy=bench.strategy.value,
            source_format=bench.source_format.value,
            key_buckets=bench.key_buckets,
            shuffle_partitions=bench.shuffle_partitions,
            session_seconds=session_seconds,
            write_seconds=write_seconds,
            source_seconds=source_seconds,
            materializer_run_seconds=materializer_seconds,
            end_to_end_seconds=end_to_end,
            sink_timer_seconds=sum(batch.sink_seconds for batch in result.batches),
            batches=len(result.batches),
            batch_ms=tuple(timing.total_ms for timing in result.timings),
            outside_batch_ms=tuple(timing.outside_add_batch_ms for timing in result.timings),
            state_commit_ms=tuple(timing.state_commit_ms for timing in result.timings),
            sink_write_ms=tuple(round(batch.write_seconds * 1000) for batch in result.batches),
            fixed_batch_ms=fixed,
            keyed_end_to_end_seconds=keyed_seconds,
            peak_rss_mb={role: round(peak / 2**20, 1) for role, peak in rss.peaks.items()},
            sink=bench.sink,
            sink_bytes=written,
            libraries=library_versions(),
        )


LIBRARIES = ("pyspark", "pyarrow", "msgpack", "numpy")
"""The installed distributions whose versions :class:`PipelineFigures` records."""


def library_versions() -> dict[str, str]:
    """``{distribution: version}`` of :data:`LIBRARIES` as installed (``"absent"`` when not)."""
    found: dict[str, str] = {}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def libraries_line(libraries: dict[str, str]) -> str:
    """``libraries: pyspark 4.3.0, pyarrow 19.0.1, ...``: the line the reports give them in."""
    return "libraries: " + ", ".join(f"{name} {version}" for name, version in libraries.items())


def fixed_cost_batches(job: JobSpec, source: Path, changes: int) -> tuple[int, ...]:
    """Continue ``job`` on its checkpoint with :data:`FIXED_BATCHES` one-change files (one
    micro-batch each: an update of key 0); the time in ms (Spark's report) of each batch but
    the first, which also pays the query's start."""
    from ..jobs.runner import run_job

    next_seq = changes + 10
    for number in range(FIXED_BATCHES):
        record = {"seq": next_seq + number, "op": "+U", "id": 0, "version": -1 - number, "payload": "fixed"}
        _write_file(source, 9_000 + number, [record], job.source.format)
        # Spark's file source orders new files by modification time.
        time.sleep(0.01)
    result = run_job(job)
    return tuple(timing.total_ms for timing in result.timings[1:])


def report(figures: PipelineFigures) -> str:
    """Human-readable figures: end to end vs the goal, then the stages."""
    rate = figures.end_to_end_rate
    lines = [
        f"pipeline: {figures.changes:,} changes over {figures.keys:,} keys, {figures.files} file(s) "
        f"({figures.batches} micro-batches, {figures.source_format}), strategy {figures.strategy}, local[2], "
        f"{figures.shuffle_partitions} shuffle partitions, "
        f"key buckets {figures.key_buckets or 'none (one group per key)'}, sink {figures.sink}",
        f"end to end, whole rows (upsert-key: [], as the example job): {figures.end_to_end_seconds:.1f} s "
        f"= {rate:,.0f} changes/s "
        f"(goal {GOAL_CHANGES_PER_SECOND:,.0f}: ratio {rate / GOAL_CHANGES_PER_SECOND:.2f})",
    ]
    keyed = figures.keyed_rate
    if keyed is not None and figures.keyed_end_to_end_seconds is not None:
        seconds = figures.keyed_end_to_end_seconds
        lines.append(f"end to end, upsert key {','.join(KEYED)}: {seconds:.1f} s = {keyed:,.0f} changes/s")
    if figures.libraries:
        lines.append(libraries_line(figures.libraries))
    if figures.peak_rss_mb:
        peaks = figures.peak_rss_mb
        lines.append(
            f"peak RSS: driver (Python) {peaks.get('driver', 0):,.0f} MiB, "
            f"Spark JVM {peaks.get('jvm', 0):,.0f} MiB, "
            f"Python workers {peaks.get('workers', 0):,.0f} MiB (summed)"
        )
    lines.append("stages (whole rows):")
    for stage, seconds in figures.stages().items():
        stage_rate = figures.changes / seconds if seconds > 0 else float("inf")
        lines.append(f"  {stage:<24} {seconds:7.1f} s  {stage_rate:>12,.0f} changes/s")
    lines.append(
        f"  (the sink's own timer: {figures.sink_timer_seconds:.1f} s, includes computing each batch; "
        f"Spark session start {figures.session_seconds:.1f} s and writing the files "
        f"{figures.write_seconds:.1f} s are excluded)"
    )
    if figures.sink_bytes:
        lines.append(
            f"  (the sink wrote {figures.sink_bytes:,} bytes: "
            f"{figures.sink_bytes / max(figures.batches, 1):,.0f} per micro-batch)"
        )
    summary = figures.batch_summary()
    if summary:
        lines.append("per micro-batch (ms):            min   median      max")
        for name, values in summary.items():
            lines.append(
                f"  {name:<27} {values['min']:>7,.0f} {values['median']:>8,.0f} {values['max']:>8,.0f}"
            )
    fixed = figures.fixed_cost_ms
    if fixed is not None and figures.batch_ms:
        median = statistics.median(figures.batch_ms)
        lines.append(
            f"fixed cost per micro-batch: {fixed:,.0f} ms = {fixed / median:.0%} of the median batch "
            f"({median:,.0f} ms for {figures.changes / max(figures.batches, 1):,.0f} changes)"
        )
    return "\n".join(lines)
