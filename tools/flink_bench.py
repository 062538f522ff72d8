r"""Apache Flink 2.3's SinkUpsertMaterializer on the FLIP-544 workload: its throughput alone.

The Flink side of ``tools/flink_side_by_side.py``; runs under the ``flink`` extra
(``pip install '.[flink]'``: PyFlink 2.3.0) with Java 17 on PATH.

**What it measures**: records per millisecond of the materializer operator's own time (ops/ms,
inserts and deletes counted alike), per strategy (``LEGACY``, ``VALUE``, ``MAP``, ``ADAPTIVE``;
``table.exec.sink.upsert-materialize-strategy.type``, ADAPTIVE with Flink's default
thresholds), state backend (``hashmap`` or ``rocksdb``, Flink's MiniCluster defaults), matching
mode (with the upsert key ``upsertKey`` declared as the changelog source's primary key, or
without one: whole rows) and history.

**Workload**: rows ``(upsertKey BIGINT, streamKey INT, payload STRING)``, a fixed ASCII payload
of ``--payload`` bytes (250), the sink keyed by ``streamKey``, all records of one *invocation* on
one sink key. Record ``i`` of ``--records`` (10,000) is ``+I(i)`` and then, when selected,
``-D(i - (1 + delay) // 2)`` (a delete of a negative id is a miss, dropped by the operator): at
100 % every insert is followed by a delete and the key holds about ``(1 + delay) // 2`` live
rows (delay 2: one or two; delay 2,000: about 1,000, the history of ``upsertmat bench
--retract-delay 1000``); below 100 % record ``i`` deletes when ``i >= delay`` and ``i % 100 <
pct``, as the upstream JMH benchmark does.

**How**: one JVM (PyFlink's) holding one Flink MiniCluster for the whole run
(:class:`upsertmat.conformance.tools.flink.LocalCluster`), parallelism 1. Each input shape is
written once as a ``debezium-json`` file and read by Flink's ``filesystem`` source, so no
record crosses from Python during a job. A measured job is ``INSERT INTO snk SELECT upsertKey,
streamKey, payload FROM src`` with ``table.exec.sink.upsert-materialize=FORCE`` into a
``blackhole`` sink with ``PRIMARY KEY (streamKey)``; every exchange of its graph is made
blocking, so the materializer's task starts after the source's has finished and runs alone,
never idle or back-pressured. After the job, the task's ``numRecordsIn`` (checked to be every
record of the input) and its accumulated busy time come from Flink's own metrics (the job's
archived execution graph). That task also deserialises its input and calls the sink: a
*reference job* on the same input without the materializer (the sink writer cut into a task of
its own behind the same blocking exchange) measures that, and the median of its busy times is
subtracted::

    ops/ms = numRecordsIn / (busy time of the materializer's task - median reference busy time)

A cell whose single invocation takes less than ``--target-ms`` (600) of materializer time runs
*k* invocations per job (k = 2, 4, ... up to ``--max-invocations``, 32) on sink keys 0..k-1, each
a fresh history; a probe job with one invocation chooses k. ``--warmup`` (4) unrecorded job
pairs warm the JIT first; then the ``--reps`` (3) repetitions go round-robin over the cells of
an input shape, so that a slow spell of a shared machine hits different cells. The 1-minute
load average is recorded per job.

Caveats: a full Flink task, not the upstream JMH harness (each record also pays the keyed
context switch and the task loop; each job's generated code is compiled and warmed within it),
so the fast cells (heap, short histories) move by up to 2x between sittings. Busy time is wall
time while the task is runnable (GC pauses and CPU stolen by other work count). No checkpoint
is taken during a job. Cost: about a second per job on 2 cores plus the cells' own time; the
default grid of ``flink_side_by_side.py`` (32 cells, 3 repetitions) takes 5-20 minutes.

Usage::

    python tools/flink_bench.py --strategies LEGACY,MAP --backends hashmap,rocksdb \
        --upsert-key true,false --delays 2,2000 --reps 3 --out results

writes ``results.json`` (every job: busy, reference, records, load; per cell the median) and
prints one line per cell. Exit 0, or 2 on a usage error.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STRATEGIES = ("LEGACY", "VALUE", "MAP", "ADAPTIVE")
BACKENDS = {"hashmap": "HashMapStateBackend", "rocksdb": "EmbeddedRocksDBStateBackend"}
"""``state.backend.type`` -> the backend Flink reports for the job (checked)."""
PAYLOAD_BASE = "flink-sum-peer-benchmark-payload-"


def payload(size: int) -> str:
    """The fixed ASCII payload of ``size`` bytes."""
    return (PAYLOAD_BASE * (size // len(PAYLOAD_BASE) + 1))[:size]


def workload(records: int, delay: int, pct: int, invocations: int = 1) -> list[tuple[str, int, int]]:
    """The events ``(kind, upsertKey, streamKey)`` of ``invocations`` invocations (sink keys
    0..invocations-1), each ``records`` inserts and their deletes (module docstring). O(events)."""
    offset = (1 + delay) // 2
    events = []
    for key in range(invocations):
        for i in range(records):
            events.append(("+I", i, key))
            if pct >= 100 or (i >= delay and i % 100 < pct):
                events.append(("-D", i - offset, key))
    return events


def changelog_lines(events: Sequence[tuple[str, int, int]], size: int) -> list[str]:
    """The events as ``debezium-json`` lines (``op`` ``c`` or ``d``)."""
    text = json.dumps(payload(size))
    lines = []
    for kind, upsert_key, stream_key in events:
        row = f'{{"upsertKey":{upsert_key},"streamKey":{stream_key},"payload":{text}}}'
        if kind == "+I":
            lines.append(f'{{"before":null,"after":{row},"op":"c"}}')
        else:
            lines.append(f'{{"before":{row},"after":null,"op":"d"}}')
    return lines


@dataclass(frozen=True)
class Cell:
    """One configuration of the operator."""

    strategy: str
    backend: str
    upsert_key: bool
    delay: int
    pct: int


@dataclass
class Measured:
    """A cell's jobs: the invocations per job chosen and every measured repetition."""

    cell: Cell
    invocations: int = 1
    runs: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """The cell as a result record (what ``flink_side_by_side.py`` reads)."""
        good = [run["ops_per_ms"] for run in self.runs if run.get("ops_per_ms")]
        errors = [run["error"] for run in self.runs if run.get("error")]
        return {
            "strategy": self.cell.strategy,
            "backend": self.cell.backend,
            "has_upsert_key": self.cell.upsert_key,
            "retract_delay": self.cell.delay,
            "retract_percentage": self.cell.pct,
            "invocations_per_job": self.invocations,
            "ops_per_ms_median": statistics.median(good) if good else None,
            "ops_per_ms_min": min(good, default=None),
            "ops_per_ms_max": max(good, default=None),
            "error": errors[0] if errors else None,
            "runs": self.runs,
        }


class FlinkBench:
    """Jobs on one kept MiniCluster: :meth:`measure` one cell, :meth:`reference` the input's cost."""

    def __init__(self, records: int, size: int, workdir: Path) -> None:
        from upsertmat.conformance.tools.flink import LocalCluster

        self.records = records
        self.size = size
        self.workdir = workdir
        self.cluster = LocalCluster()
        self.jvm = self.cluster.jvm
        self.inputs: dict[tuple[int, int, int], tuple[Path, int]] = {}
        self.references: dict[Path, list[float]] = {}
        self.version = str(self.jvm.org.apache.flink.runtime.util.EnvironmentInformation.getVersion())

    def input(self, delay: int, pct: int, invocations: int) -> tuple[Path, int]:
        """The debezium-json file of this shape (written once) and its number of records."""
        key = (delay, pct, invocations)
        if key not in self.inputs:
            events = workload(self.records, delay, pct, invocations)
            path = self.workdir / f"input-d{delay}-p{pct}-x{invocations}.json"
            path.write_text("\n".join(changelog_lines(events, self.size)) + "\n", encoding="utf-8")
            self.inputs[key] = (path, len(events))
        return self.inputs[key]

    def _graph(self, path: Path, cell: Cell, materialize: bool) -> Any:
        """The job graph, every exchange blocking (without the materializer: the reference job,
        its sink writer a task of its own)."""
        from upsertmat.conformance.tools.flink import environments

        env, tables = environments({"state.backend.type": cell.backend})
        env.set_buffer_timeout(-1)  # blocking exchanges need it
        config = tables.get_config()
        config.set("table.exec.sink.upsert-materialize", "FORCE" if materialize else "NONE")
        config.set("table.exec.sink.upsert-materialize-strategy.type", cell.strategy)
        config.set("table.exec.sink.require-on-conflict", "false")
        not_null, key = (
            (" NOT NULL", ", PRIMARY KEY (upsertKey) NOT ENFORCED") if cell.upsert_key else ("", "")
        )
        tables.execute_sql(
            f"CREATE TEMPORARY TABLE src (upsertKey BIGINT{not_null}, streamKey INT NOT NULL, "
            f"payload STRING{key}) WITH ('connector' = 'filesystem', 'path' = '{path}', "
            "'format' = 'debezium-json')"
        )
        tables.execute_sql(
            "CREATE TEMPORARY TABLE snk (upsertKey BIGINT, streamKey INT NOT NULL, payload STRING, "
            "PRIMARY KEY (streamKey) NOT ENFORCED) WITH ('connector' = 'blackhole')"
        )
        statements = tables.create_statement_set()
        statements.add_insert_sql("INSERT INTO snk SELECT upsertKey, streamKey, payload FROM src")
        statements.attach_as_datastream()
        graph = env._j_stream_execution_environment.getStreamGraph()
        flink = self.jvm.org.apache.flink
        graph.setGlobalStreamExchangeMode(
            flink.streaming.api.graph.GlobalStreamExchangeMode.ALL_EDGES_BLOCKING
        )
        if not materialize:
            for node in list(graph.getStreamNodes().toArray()):
                if "Writer" in node.getOperatorName():
                    node.getOperatorFactory().setChainingStrategy(
                        flink.streaming.api.operators.ChainingStrategy.HEAD
                    )
        return graph.getJobGraph()

    def run_job(self, path: Path, cell: Cell, materialize: bool) -> dict[str, Any]:
        """Run one job; the measured task's records in and busy time, the job's backend, load."""
        load = os.getloadavg()[0]
        archived = self.cluster.submit(self._graph(path, cell, materialize))
        tasks = []
        vertices = archived.getVerticesTopologically().iterator()
        while vertices.hasNext():
            vertex = vertices.next()
            metrics = vertex.getTaskVertices()[0].getCurrentExecutionAttempt().getIOMetrics()
            tasks.append((str(vertex.getName()), metrics.getNumRecordsIn(), metrics.getAccumulateBusyTime()))
        wanted = "SinkMaterializer" if materialize else "Writer"
        found = [task for task in tasks if wanted in task[0] and (materialize or "Source" not in task[0])]
        if len(found) != 1:
            raise RuntimeError(f"no single {wanted} task among {[task[0] for task in tasks]}")
        backend = archived.getStateBackendName()
        return {
            "records_in": int(found[0][1]),
            "busy_ms": float(found[0][2]),
            "state_backend": str(backend.get()) if backend.isPresent() else None,
            "load1": round(load, 2),
        }

    def reference(self, path: Path, reps: int) -> float:
        """The median busy time (ms) of the sink task of ``reps`` reference jobs on ``path``."""
        if path not in self.references:
            cell = Cell("LEGACY", "hashmap", False, 0, 100)
            self.references[path] = [self.run_job(path, cell, False)["busy_ms"] for _ in range(reps)]
        return statistics.median(self.references[path])

    def measure(self, cell: Cell, invocations: int, reps: int) -> dict[str, Any]:
        """One measured job of ``cell`` with ``invocations`` invocations per job."""
        path, expected = self.input(cell.delay, cell.pct, invocations)
        reference = self.reference(path, reps)
        run = self.run_job(path, cell, True)
        own = run["busy_ms"] - reference
        run.update(
            invocations=invocations,
            reference_ms=reference,
            materializer_ms=round(own, 2),
            ops_per_ms=run["records_in"] / own if own > 0 else None,
        )
        if run["records_in"] != expected:
            run["error"] = f"the materializer read {run['records_in']} records, not {expected}"
        if run["state_backend"] != BACKENDS[cell.backend]:
            run["error"] = f"the job ran on {run['state_backend']}, not {BACKENDS[cell.backend]}"
        return run


def sweep(
    bench: FlinkBench, cells: list[Cell], args: argparse.Namespace, log: Callable[[str], None]
) -> list[Measured]:
    """Warm up, then per input shape: probe each cell's invocations per job, then the
    repetitions round-robin over the shape's cells."""
    warm = bench.input(100, 100, 4)[0]
    for number in range(args.warmup):  # unrecorded: the JIT's, not the cells'
        strategy, backend = ("LEGACY", "ADAPTIVE", "VALUE")[number % 3], list(BACKENDS)[number % 2]
        bench.run_job(warm, Cell(strategy, backend, number % 2 == 1, 100, 100), True)
        bench.run_job(warm, Cell(strategy, backend, False, 100, 100), False)
    log(f"warm-up: {args.warmup} job pairs")
    measured = []
    for shape in dict.fromkeys((cell.delay, cell.pct) for cell in cells):
        group = [Measured(cell) for cell in cells if (cell.delay, cell.pct) == shape]
        for item in group:
            probe = bench.measure(item.cell, 1, args.reps)
            own = probe["materializer_ms"]
            while (
                item.invocations < args.max_invocations and item.invocations * max(own, 2.0) < args.target_ms
            ):
                item.invocations *= 2
            if item.invocations == 1:
                item.runs.append(probe)  # a valid measurement at one invocation per job
        for _ in range(args.reps):
            for item in group:
                if len(item.runs) < args.reps:
                    item.runs.append(bench.measure(item.cell, item.invocations, args.reps))
        for item in group:
            summary = item.summary()
            median = summary["ops_per_ms_median"]
            cell = item.cell
            log(
                f"{cell.strategy:8} {cell.backend:7} upsert key {str(cell.upsert_key).lower():5} "
                f"delay {cell.delay:<5} x{item.invocations:<2} ops/ms "
                f"{'-' if median is None else f'{median:,.0f}'}"
                + (f"  ERROR {summary['error']}" if summary["error"] else "")
            )
        measured += group
    return measured


def words(kind: Callable[[str], Any], allowed: Sequence[Any] | None = None) -> Callable[[str], list[Any]]:
    """An argparse type: a comma-separated list of ``kind`` values (from ``allowed``)."""

    def parse(text: str) -> list[Any]:
        values = [kind(part.strip()) for part in text.split(",") if part.strip()]
        wrong = [value for value in values if allowed is not None and value not in allowed]
        if not values or wrong:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {allowed}, got {text!r}")
        return values

    return parse


def boolean(text: str) -> bool:
    """``true``/``false`` (argparse type)."""
    if text.lower() not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() == "true"


def parser() -> argparse.ArgumentParser:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategies", type=words(str.upper, STRATEGIES), default=list(STRATEGIES))
    ap.add_argument("--backends", type=words(str.lower, list(BACKENDS)), default=list(BACKENDS))
    ap.add_argument("--upsert-key", type=words(boolean), default=[True, False], help="true, false or both")
    ap.add_argument("--delays", type=words(int), default=[2, 2000], help="retract delays (default 2,2000)")
    ap.add_argument("--pcts", type=words(int), default=[100], help="retract percentages (default 100)")
    ap.add_argument("--records", type=int, default=10_000, help="inserts per invocation (default 10,000)")
    ap.add_argument("--payload", type=int, default=250, help="payload bytes (default 250)")
    ap.add_argument("--reps", type=int, default=3, help="measured repetitions per cell (default 3)")
    ap.add_argument("--warmup", type=int, default=4, help="unrecorded warm-up job pairs (default 4)")
    ap.add_argument("--target-ms", type=float, default=600, help="least materializer time per job (600)")
    ap.add_argument("--max-invocations", type=int, default=32, help="most invocations per job (32)")
    ap.add_argument("--out", default="results-flink", help="output prefix: OUT.json (default results-flink)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the grid, write ``OUT.json``, print one line per cell."""
    args = parser().parse_args(argv)
    if (
        args.records < 1
        or args.reps < 1
        or args.max_invocations < 1
        or any(p < 1 or p > 100 for p in args.pcts)
    ):
        print(
            "flink_bench.py: --records, --reps and --max-invocations must be >= 1, --pcts 1-100",
            file=sys.stderr,
        )
        return 2
    try:
        import pyflink  # noqa: F401
    except ImportError:
        print("flink_bench.py: needs PyFlink 2.3.0: pip install '.[flink]' (and Java 17)", file=sys.stderr)
        return 2
    cells = [
        Cell(strategy, backend, upsert_key, delay, pct)
        for pct in args.pcts
        for delay in args.delays
        for backend in args.backends
        for upsert_key in args.upsert_key
        for strategy in args.strategies
    ]
    started = time.monotonic()

    def log(line: str) -> None:
        print(line, flush=True)

    with tempfile.TemporaryDirectory(prefix="flink-bench-") as directory:
        bench = FlinkBench(args.records, args.payload, Path(directory))
        try:
            measured = sweep(bench, cells, args, log)
        finally:
            bench.cluster.close()
    meta = {
        "flink_version": bench.version,
        "python": platform.python_version(),
        "java": str(bench.jvm.java.lang.System.getProperty("java.version")),
        "cpus": os.cpu_count(),
        "date_utc": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "records": args.records,
        "payload_bytes": args.payload,
        "reps": args.reps,
        "warmup_jobs": args.warmup,
        "target_ms": args.target_ms,
        "seconds": round(time.monotonic() - started),
        "method": "numRecordsIn / (busy time of the materializer's task - median busy time of the "
        "sink task of a reference job without it on the same input); blocking exchanges",
    }
    document = {"meta": meta, "results": [item.summary() for item in measured]}
    Path(f"{args.out}.json").write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    log(f"wrote {args.out}.json ({meta['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
