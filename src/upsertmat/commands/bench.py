"""``upsertmat bench``: the FLIP-544 micro-benchmark of the materializer strategies.

Argument wiring only: the options' types are :mod:`upsertmat.bench.options`, the values of
the options not given :mod:`upsertmat.bench.presets`, and what a run measures (the grid's
:class:`~upsertmat.bench.runner.Plan` over whatever the registry can build, the pipeline and
scale benchmarks) :mod:`upsertmat.bench.plans`. The grid runs with progress on stderr, then
writes ``results.csv``, ``results.json`` and, when matplotlib (the ``bench`` extra) is
installed, ``throughput-<backend>.png`` into ``--output-dir`` and prints a table and the goal
checks (or, with ``--format json``, the JSON document) on stdout.
Method and workload: ``docs/benchmarks.md`` and :mod:`upsertmat.bench.workload`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from upsertmat.bench import plans
from upsertmat.bench.grid import QUICK_GOALS_NOTE, plots_available, run_grid
from upsertmat.bench.lakehouse import TABLE_FORMATS
from upsertmat.bench.options import (
    backend,
    flatten,
    list_of,
    non_negative,
    non_negative_int,
    on_off,
    percentage,
    seconds,
    sink_kinds,
    strategy,
    workload,
)
from upsertmat.bench.pipeline import SERVER_SINKS, SINKS, PipelineBench
from upsertmat.bench.presets import FULL, QUICK
from upsertmat.bench.progress import Progress
from upsertmat.bench.report import goals_table, machine_info, markdown_report, results_table
from upsertmat.bench.runner import CLOCKS, FLIP544, WALL, WORKLOADS, Plan
from upsertmat.commands.options import positive_int
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.build import needs_extra
from upsertmat.impls.settings import DEFAULT_CHECKPOINT_INTERVAL
from upsertmat.spark.config import STATE_LAYOUTS
from upsertmat.spark.parts import SparkOptions

NAME = "bench"

EPILOG = """\
workload flip544: one sink key; each step adds row (0, i, payload) and, once more than
retract_delay rows were added, retracts row i - retract_delay with probability
retract_percentage/100 (seeded). --records counts the timed records (adds + retractions);
by default the first retract_delay adds are an untimed warm-up (--no-warmup to time them).
workload many-keys: --changes changes over --keys sink keys (default 1,000,000 over
100,000; --quick: 20,000 over 2,000): every key inserted once (untimed warm-up), then
-U/+U update pairs of random keys, half of them arriving out of order (+U first).
throughput = timed records / ms (ops/ms), median and spread over --repetitions fresh
materializers; memory per cell: state bytes per live row (heap: traced allocations; rocksdb,
lmdb: bytes on disk above an empty state) and the process's peak RSS. see docs/benchmarks.md.

exit codes: 0 ok (a cell that failed is reported in the table, not by the exit code),
  2 usage error (a bad option or value, nothing registered to benchmark),
  4 I/O error (the output directory cannot be written), 70 internal error,
  130/143 interrupted by SIGINT/SIGTERM, 141 stdout's reader went away.

examples:
  upsertmat bench                                    # the full grid (tens of minutes)
  upsertmat bench --quick                            # a smoke run in seconds
  upsertmat bench --workload many-keys --backend rocksdb --changes 200000 --keys 20000
  upsertmat bench --strategy MAP,LEGACY --backend rocksdb --retract-delay 10,1000,5000
  upsertmat bench --format json > results.json
"""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the bench options to ``parser``."""
    axes = parser.add_argument_group("axes (comma-separated lists; repeatable)")
    axes.add_argument(
        "--strategy",
        action="append",
        type=list_of(strategy, "strategy"),
        metavar="S[,S...]",
        help="LEGACY, VALUE, MAP, SORTED, ADAPTIVE (default: every registered one)",
    )
    axes.add_argument(
        "--backend",
        action="append",
        type=list_of(backend, "backend"),
        metavar="B[,B...]",
        help="heap, rocksdb, lmdb (default: those with a registered implementation)",
    )
    axes.add_argument(
        "--upsert-key",
        action="append",
        type=list_of(on_off, "on/off value"),
        metavar="on,off",
        help="upsert key = the id column (on) or whole-row matching (off); default: on,off "
        "(with --table-sizes: the sweep's matching modes, default off,on)",
    )
    axes.add_argument(
        "--retract-delay",
        action="append",
        type=list_of(non_negative, "delay"),
        metavar="N[,N...]",
        help=f"history length (default {','.join(map(str, FULL.retract_delays))})",
    )
    axes.add_argument(
        "--retract-percentage",
        action="append",
        type=list_of(percentage, "percentage"),
        metavar="P[,P...]",
        help=f"retraction probability in %% (default {','.join(map(str, FULL.retract_percentages))})",
    )
    axes.add_argument(
        "--workload",
        action="append",
        type=list_of(workload, "workload"),
        metavar="W[,W...]",
        help=f"{', '.join(WORKLOADS)} (default: both; --quick: {FLIP544})",
    )
    work = parser.add_argument_group("workload and measurement")
    work.add_argument("--records", type=positive_int, help=f"timed records per run (default {FULL.records})")
    work.add_argument(
        "--payload-size", type=positive_int, default=250, help="payload bytes per row (default 250)"
    )
    work.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    work.add_argument(
        "--no-warmup",
        dest="warmup",
        action="store_false",
        help="time the history build-up too (default: the first retract_delay adds are untimed)",
    )
    work.add_argument("--repetitions", type=positive_int, help=f"runs per cell (default {FULL.repetitions})")
    work.add_argument(
        "--max-seconds-per-cell",
        type=seconds,
        help=f"wall-time budget of one cell; slower cells are reported partial/skipped "
        f"(default {FULL.max_seconds_per_cell:g})",
    )
    work.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke preset: {QUICK.records} records, delays {','.join(map(str, QUICK.retract_delays))}, "
        f"{QUICK.repetitions} repetition, {QUICK.max_seconds_per_cell:g} s per cell (explicit options win)",
    )
    work.add_argument(
        "--async-state",
        action="store_true",
        help="run every cell with table.exec.async-state.enabled=true (batched state reads)",
    )
    work.add_argument("--tmp-dir", type=Path, help="where byte backends keep their temporary state")
    work.add_argument(
        "--checkpoint-interval",
        type=positive_int,
        default=DEFAULT_CHECKPOINT_INTERVAL,
        metavar="N",
        help="rocksdb/lmdb: inputs per durable commit (execution.checkpointing.interval), the "
        f"commit after the last timed input timed too (default {DEFAULT_CHECKPOINT_INTERVAL}, "
        "replay's; 1 = a commit per input, the library default)",
    )
    work.add_argument(
        "--clock",
        choices=CLOCKS,
        default=WALL,
        help="what the medians, plots and goals use: wall time (default) or the process's CPU "
        "time (both are always recorded; CPU time is robust on a busy machine)",
    )
    pipe = parser.add_argument_group("the PySpark pipeline (--pipeline; docs/benchmarks.md, Pipeline)")
    pipe.add_argument(
        "--pipeline",
        action="store_true",
        help="benchmark the pipeline end to end and per stage instead (needs the spark extra)",
    )
    pipe.add_argument(
        "--gateway",
        action="store_true",
        help="a job through 'upsertmat gateway' against the same job under 'upsertmat run' (alternated, "
        "--repetitions rounds, default 2), then result-page latency with 8 clients (needs the gateway extra)",
    )
    pipe.add_argument(
        "--changes",
        type=positive_int,
        help="changes of the pipeline and of the many-keys workload (default 1,000,000; "
        f"many-keys with --quick: {QUICK.many_keys_changes:,})",
    )
    pipe.add_argument(
        "--keys",
        type=positive_int,
        help=f"sink keys of both (default 100,000; many-keys with --quick: {QUICK.many_keys_keys:,})",
    )
    pipe.add_argument(
        "--files", type=positive_int, default=1, help="source files = micro-batches (default 1)"
    )
    pipe.add_argument("--source-format", choices=("jsonl", "parquet"), default="jsonl", help="default jsonl")
    pipe.add_argument(
        "--pipeline-sink",
        type=sink_kinds,
        default=("sqlite",),
        metavar="KIND[,KIND...]",
        help=f"the end-to-end run's sink kind, one of {', '.join(SINKS)} (default sqlite; "
        f"{', '.join(TABLE_FORMATS)} need the lakehouse extra); with --table-sizes a list, which "
        f"may name {', '.join(SERVER_SINKS)} (with --postgres-url)",
    )
    pipe.add_argument(
        "--state-layout",
        choices=STATE_LAYOUTS,
        default="log",
        help="with key buckets: each bucket's state as a log read through a machine-local copy "
        "(log, the default: a batch costs what it touches) or as one blob (blob: read and "
        "rewritten whole by every batch touching the bucket)",
    )
    pipe.add_argument(
        "--state-inline-bytes",
        type=non_negative_int,
        default=SparkOptions.state_inline_bytes,
        metavar="BYTES",
        help="with --state-layout log: a bucket's state of at most BYTES stored bytes is kept whole "
        "in its head (two state calls a batch, no local copy); 0: every state as a log "
        f"(default {SparkOptions.state_inline_bytes})",
    )
    pipe.add_argument(
        "--table-sizes",
        type=_sizes,
        metavar="N[,N...]",
        help="the scale sweep instead: per table size (live sink keys) load the table, then time "
        "--scale-batches micro-batches of --batch-changes random-key changes, whole rows and with "
        "an upsert key, per --pipeline-sink (docs/benchmarks.md, The pipeline at table scale)",
    )
    pipe.add_argument(
        "--postgres-url",
        metavar="URL",
        help="with --table-sizes: also run every size into this PostgreSQL database (a table per run, "
        "dropped after it); --pipeline-sink postgresql: into it alone",
    )
    pipe.add_argument(
        "--batch-changes",
        type=positive_int,
        default=100_000,
        metavar="N",
        help="with --table-sizes: changes per measured micro-batch (default 100,000)",
    )
    pipe.add_argument(
        "--scale-batches",
        type=positive_int,
        default=3,
        metavar="N",
        help="with --table-sizes: measured micro-batches per run (default 3)",
    )
    pipe.add_argument(
        "--table-reads",
        type=positive_int,
        metavar="N",
        help=f"with --pipeline-sink {'|'.join(TABLE_FORMATS)}: drive the sink with N micro-batches of "
        "updates, then compare a full read before and after maintenance with the same table written in "
        "one batch",
    )
    pipe.add_argument(
        "--key-buckets",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="Spark grouping: N hash buckets of sink keys (default 256; 0: one group per sink key)",
    )
    pipe.add_argument(
        "--shuffle-partitions",
        type=positive_int,
        default=None,
        metavar="N",
        help="spark.sql.shuffle.partitions = state partitions (default 2, on local[2])",
    )
    misses = parser.add_argument_group(
        "rule-7 explanations (--misses; docs/benchmarks.md, Miss explanations)"
    )
    misses.add_argument(
        "--misses",
        action="store_true",
        help="measure what explaining misses costs instead: a clean and a miss workload, explanations "
        "off and on (--strategy, --backend, --records (default 20,000), --keys (default 1,000), "
        "--repetitions (default 5) apply)",
    )
    misses.add_argument(
        "--miss-percentage",
        type=non_negative_int,
        default=50,
        metavar="P",
        help="share of retractions that match nothing in the miss workload (default 50)",
    )
    out = parser.add_argument_group("output")
    out.add_argument(
        "--output-dir",
        type=Path,
        default=Path("bench-results"),
        help="results.csv, results.json, throughput-<backend>.png with matplotlib (default bench-results/)",
    )
    out.add_argument(
        "--format",
        choices=("table", "json", "markdown"),
        default="table",
        help="stdout: a table (default), the JSON document, or markdown tables (for docs/benchmarks.md)",
    )
    out.add_argument("--quiet", action="store_true", help="no progress on stderr")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench`` on the top-level parser (``run`` is the handler)."""
    parser = subparsers.add_parser(
        NAME,
        help="benchmark the strategies and backends (FLIP-544 workload)",
        description="Benchmark the materializer strategies on the FLIP-544 workload.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    configure(parser)
    parser.set_defaults(run=run)


def build_plan(args: argparse.Namespace) -> tuple[Plan, list[str]]:
    """The plan the options describe, and the requested implementations nobody registered."""
    return plans.grid_plan(
        quick=args.quick,
        strategies=flatten(args.strategy),
        backends=flatten(args.backend),
        upsert_keys=flatten(args.upsert_key),
        retract_delays=flatten(args.retract_delay),
        retract_percentages=flatten(args.retract_percentage),
        workloads=flatten(args.workload),
        records=args.records,
        repetitions=args.repetitions,
        max_seconds_per_cell=args.max_seconds_per_cell,
        changes=args.changes,
        keys=args.keys,
        payload_size=args.payload_size,
        seed=args.seed,
        warmup=args.warmup,
        tmp_root=args.tmp_dir,
        clock=args.clock,
        async_state=args.async_state,
        checkpoint_interval=args.checkpoint_interval,
    )


def _sizes(text: str) -> tuple[int, ...]:
    """An argparse type: a comma-separated list of positive integers (``100000,1000000``)."""
    return tuple(positive_int(part) for part in text.split(","))


def _one_sink(args: argparse.Namespace) -> str:
    if len(args.pipeline_sink) != 1:
        raise CliError("--pipeline-sink takes one kind here (a list only with --table-sizes)", ExitCode.USAGE)
    kind = str(args.pipeline_sink[0])
    if kind in SERVER_SINKS:
        raise CliError(
            f"--pipeline-sink {kind}: only with --table-sizes and --postgres-url (the end-to-end run "
            f"writes a sink in its own directory: one of {', '.join(SINKS)})",
            ExitCode.USAGE,
        )
    return kind


def pipeline_bench(args: argparse.Namespace) -> PipelineBench:
    """The :class:`~upsertmat.bench.pipeline.PipelineBench` of ``--pipeline``/``--gateway``."""
    return plans.pipeline_bench(
        strategies=flatten(args.strategy),
        changes=args.changes,
        keys=args.keys,
        files=args.files,
        seed=args.seed,
        source_format=args.source_format,
        key_buckets=args.key_buckets,
        shuffle_partitions=args.shuffle_partitions,
        sink=_one_sink(args),
        state_layout=args.state_layout,
        state_inline_bytes=args.state_inline_bytes,
    )


PLOTS_SKIPPED = f"plots skipped: matplotlib is not installed (PNG plotting {needs_extra('bench')})"


def _log(args: argparse.Namespace) -> Callable[[str], None] | None:
    """The step lines of the Spark benchmarks on stderr, unless ``--quiet``."""
    if args.quiet:
        return None
    return lambda line: print(f"upsertmat {NAME}: {line}", file=sys.stderr, flush=True)


def _write_document(args: argparse.Namespace, name: str, data: dict[str, Any], text: str) -> int:
    """Write ``data`` as ``--output-dir/NAME``; print it (``--format json``) or ``text``."""
    document = json.dumps(data, indent=2)
    try:
        args.output_dir.mkdir(parents=True, exist_ok=True)
        (args.output_dir / name).write_text(document + "\n", encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot write {args.output_dir / name}: {error.strerror}", ExitCode.IO) from None
    print(document if args.format == "json" else text)
    return int(ExitCode.OK)


def run(args: argparse.Namespace) -> int:
    """Run the benchmark the options describe (one mode); write the files; print the report."""
    if args.gateway:
        return run_gateway(args)
    if args.pipeline and args.table_reads:
        return run_table_reads(args)
    if args.pipeline and args.table_sizes:
        return run_table_sizes(args)
    if args.pipeline:
        return run_pipeline(args)
    if args.misses:
        return run_misses(args)
    plan, unavailable = build_plan(args)
    if not plots_available():
        print(f"upsertmat {NAME}: {PLOTS_SKIPPED}", file=sys.stderr)
    for name in unavailable:
        print(f"upsertmat {NAME}: {name} is not registered; skipped", file=sys.stderr)
    grid = run_grid(
        plan,
        args.output_dir,
        unavailable=unavailable,
        quick=args.quick,
        progress=None if args.quiet else Progress(sys.stderr),
    )
    if args.format == "json":
        print(json.dumps(grid.document, indent=2))
    elif args.format == "markdown":
        print(markdown_report(grid.results, grid.goals))
        if args.quick:
            print(f"\n{QUICK_GOALS_NOTE}")
    else:
        machine = grid.machine
        cpu = f"{machine['cpu']}, {machine['cores']} cores"
        print(f"upsertmat bench: {cpu}, {machine['python']}, {machine['date']}")
        print(
            f"{plan.records} timed records/run, payload {plan.payload_size} B, seed {plan.seed}, "
            f"warm-up {'on' if plan.warmup else 'off'}, clock {plan.clock}; "
            "ops/ms = timed records per millisecond\n"
        )
        print(results_table(grid.results))
        print("\ngoals:" + (f" {QUICK_GOALS_NOTE}" if args.quick else ""))
        print(goals_table(grid.goals))
        print(f"\nwritten: {', '.join(str(path) for path in grid.written)}")
    return int(ExitCode.OK)


def run_pipeline(args: argparse.Namespace) -> int:
    """``--pipeline``: :func:`~upsertmat.bench.pipeline.run_pipeline_bench`; ``pipeline.json``."""
    from upsertmat.bench.pipeline import report, run_pipeline_bench

    figures = run_pipeline_bench(pipeline_bench(args), args.tmp_dir, _log(args))
    return _write_document(args, "pipeline.json", figures.as_dict(), report(figures))


def run_table_sizes(args: argparse.Namespace) -> int:
    """``--pipeline --table-sizes N,...``: :func:`~upsertmat.bench.scale.run_scale`;
    ``scale.json`` (rewritten after every run, so a stopped sweep keeps what it measured) and
    ``scale.png``."""
    from upsertmat.bench.scale import report, run_scale

    servers = [kind for kind in args.pipeline_sink if kind in SERVER_SINKS]
    if servers and not args.postgres_url:
        raise CliError(
            f"--pipeline-sink {servers[0]} needs --postgres-url URL (a database to write to)", ExitCode.USAGE
        )
    bench = plans.scale_bench(
        sizes=args.table_sizes,
        batch_changes=args.batch_changes,
        batches=args.scale_batches,
        sinks=args.pipeline_sink,
        postgres_url=args.postgres_url,
        state_layout=args.state_layout,
        state_inline_bytes=args.state_inline_bytes,
        key_buckets=args.key_buckets,
        shuffle_partitions=args.shuffle_partitions,
        upsert_keys=flatten(args.upsert_key),
    )

    def keep(figures: Any) -> None:
        try:
            args.output_dir.mkdir(parents=True, exist_ok=True)
            (args.output_dir / "scale.json").write_text(json.dumps(figures.as_dict(), indent=2) + "\n")
        except OSError as error:
            raise CliError(
                f"cannot write {args.output_dir / 'scale.json'}: {error.strerror}", ExitCode.IO
            ) from None

    figures = run_scale(bench, args.tmp_dir, _log(args), keep)
    if plots_available():
        from upsertmat.bench.scale_plot import plot_scale

        plot_scale(figures, args.output_dir / "scale.png")
    else:
        print(f"upsertmat {NAME}: {PLOTS_SKIPPED}", file=sys.stderr)
    return _write_document(args, "scale.json", figures.as_dict(), report(figures))


def run_gateway(args: argparse.Namespace) -> int:
    """``--gateway``: :func:`~upsertmat.bench.gateway.run_gateway_bench`; ``gateway.json``."""
    from upsertmat.bench.gateway import report, run_gateway_bench

    bench = plans.gateway_bench(pipeline_bench(args), changes_given=args.changes is not None)
    figures = run_gateway_bench(bench, args.repetitions or 2, args.tmp_dir, _log(args))
    return _write_document(args, "gateway.json", figures.as_dict(), report(figures))


def run_table_reads(args: argparse.Namespace) -> int:
    """``--pipeline --pipeline-sink delta|iceberg --table-reads N``:
    :func:`~upsertmat.bench.lakehouse.run_table_reads`; ``table-reads-SINK.json``."""
    from upsertmat.bench.lakehouse import GOAL_READ_RATIO, report, run_table_reads

    if _one_sink(args) not in TABLE_FORMATS:
        raise CliError(f"--table-reads needs --pipeline-sink {' or '.join(TABLE_FORMATS)}", ExitCode.USAGE)
    figures = run_table_reads(
        _one_sink(args),
        args.table_reads,
        keys=args.keys or 20_000,
        seed=args.seed,
        tmp_root=args.tmp_dir,
        log=_log(args),
    )
    data = {**asdict(figures), "ratio": figures.ratio, "goal_ratio": GOAL_READ_RATIO}
    return _write_document(args, f"table-reads-{figures.sink}.json", data, report(figures))


def run_misses(args: argparse.Namespace) -> int:
    """``--misses``: the cost of rule-7 explanations (:func:`upsertmat.bench.misses.measure`)."""
    from upsertmat.bench.misses import measure, table

    spec = plans.miss_spec(
        records=args.records, keys=args.keys, miss_percentage=args.miss_percentage, seed=args.seed
    )
    pairs, _ = plans.registered_pairs(flatten(args.strategy), flatten(args.backend))
    results = measure(pairs, spec, args.repetitions or 5, quiet=args.quiet)
    if args.format == "json":
        print(json.dumps({"machine": machine_info(), "spec": asdict(spec), "results": results}, indent=2))
    else:
        print(
            f"upsertmat bench --misses: {spec.records:,} inputs over {spec.keys:,} keys, "
            f"{spec.miss_percentage} % of the retractions missing in the miss workload; inputs per ms of "
            "CPU time, medians of alternated runs; on/off = time with explanations / without"
        )
        print(table(results))
    return int(ExitCode.OK)
