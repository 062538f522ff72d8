"""Benchmark: ``ON CONFLICT DO NOTHING | DO ERROR`` (watermark compaction) against DEDUPLICATE (MAP).

Run: ``python tools/bench_conflict.py --help`` (a measurement for docs/benchmarks.md, not part of
the package). Two workloads, each a list of lines (a
change, or a watermark every ``interval`` changes; watermark times 1, 2, 3, ...):

* ``long-history``: the FLIP-544 workload of :mod:`upsertmat.bench.workload` (one sink key, upsert key on,
  ``retract_delay`` live rows, 250-byte payloads), warm-up included in the input. DEDUPLICATE
  keeps the ~``retract_delay`` live rows; the compacting behaviours keep one row plus what
  arrived since the last watermark (every compaction is a conflict here: NOTHING keeps the
  current row; ERROR runs with conflicts skipped, as ``--on-error skip`` does).
* ``many-keys``: ``records`` changes over ``keys`` sink keys (default 1,000), no upsert key,
  retract-style: a key's first change is ``+I``, later ones update it with a ``-U old``/``+U new``
  pair; keys are drawn from ``random.Random("upsertmat-bench:many-keys:{seed}")``. At most one
  row is live per key, so there is no conflict.

Per cell (workload, backend, behaviour, interval) and repetition: a fresh implementation
through :func:`upsertmat.impls.create` (byte backends in a fresh temporary directory), the
lines fed in a loop timed with :func:`time.perf_counter_ns` (watermark compaction included;
DEDUPLICATE gets the same time lines, which it ignores without TTL), then the final watermark.
Throughput = changes / elapsed ms (ops/ms); the medians of the repetitions are reported, and the
repetitions are alternated across cells (repetition 1 of every cell, then repetition 2...) so
a machine that gets busier hurts all cells alike. State size is read from ``stats()`` (outside
the timed region) just before the final watermark: rows held (DEDUPLICATE: elements; compacting:
current rows) and pending changes. ``--check-bounded`` also reads ``stats()`` after every
watermark (untimed) and fails unless every key holds at most one row and nothing is pending.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from upsertmat.bench.workload import WorkloadSpec, generate, keys_for
from upsertmat.impls import Backend, Settings, Strategy, create
from upsertmat.impls.conflict import CompactingMaterializer
from upsertmat.spec import Change, ConflictBehavior, Keys, Materializer, RowKind

if TYPE_CHECKING:
    from matplotlib.figure import Figure

Line = Change | int
WORKLOADS = ("long-history", "many-keys")
BEHAVIORS = ("DEDUPLICATE", "NOTHING", "ERROR")


@dataclass(frozen=True)
class Input:
    """A workload's keys and changes (watermarks are added per interval)."""

    name: str
    keys: Keys
    changes: list[Change]


def long_history(records: int, retract_delay: int, seed: int) -> Input:
    """The FLIP-544 workload (upsert key on, 100% retraction), warm-up prefix included."""
    workload = generate(WorkloadSpec(records=records, retract_delay=retract_delay, seed=seed))
    return Input("long-history", keys_for(True), [*workload.prefix, *workload.timed])


def many_keys(records: int, keys: int, seed: int) -> Input:
    """``records`` retract-style changes over ``keys`` sink keys (see the module docstring)."""
    rng = random.Random(f"upsertmat-bench:many-keys:{seed}")
    live: dict[int, tuple[int, int, str]] = {}
    changes: list[Change] = []
    version = 0
    while len(changes) < records:
        key = rng.randrange(keys)
        version += 1
        row = (key, version, f"v{version}")
        old = live.get(key)
        if old is None:
            changes.append(Change(RowKind.INSERT, row))
        else:
            changes.append(Change(RowKind.UPDATE_BEFORE, old))
            if len(changes) < records:
                changes.append(Change(RowKind.UPDATE_AFTER, row))
        live[key] = row
    return Input("many-keys", Keys(pk=(0,)), changes)


def with_watermarks(changes: Sequence[Change], interval: int) -> list[Line]:
    """A watermark (times 1, 2, ...) after every ``interval`` changes."""
    lines: list[Line] = []
    for number, change in enumerate(changes, 1):
        lines.append(change)
        if number % interval == 0:
            lines.append(number // interval)
    return lines


@dataclass
class Cell:
    """One configuration and its measurements."""

    workload: str
    backend: str
    behavior: str
    interval: int
    changes: int
    ops_per_ms: list[float] = field(default_factory=list)
    rows_held: int = 0
    pending_held: int = 0
    conflicts: int = 0
    misses: int = 0
    bounded_checks: int = 0

    @property
    def median(self) -> float:
        """Median ops/ms over the repetitions."""
        return statistics.median(self.ops_per_ms)


def _build(keys: Keys, backend: str, behavior: str, state_dir: Path | None) -> Materializer:
    settings = Settings(
        strategy=Strategy.MAP,
        backend=Backend(backend),
        conflict=ConflictBehavior(behavior),
        state_dir=state_dir,
    )
    materializer = create(keys, settings)
    if isinstance(materializer, CompactingMaterializer):
        materializer.skip_conflicts = True
    return materializer


def run_once(cell: Cell, data: Input, lines: Sequence[Line], check_bounded: bool) -> None:
    """One repetition of ``cell``: feed, time, read the state size, finish."""
    with tempfile.TemporaryDirectory(prefix="upsertmat-bench-conflict-") as directory:
        state_dir = None if cell.backend == "heap" else Path(directory)
        materializer = _build(data.keys, cell.backend, cell.behavior, state_dir)
        try:
            compacting = materializer if isinstance(materializer, CompactingMaterializer) else None
            process, advance = materializer.process, materializer.advance_time
            elapsed = 0
            start = time.perf_counter_ns()
            for line in lines:
                if isinstance(line, Change):
                    process(line)
                    continue
                advance(line)
                if compacting is not None:
                    compacting.take_emitted()
                    if check_bounded:
                        elapsed += time.perf_counter_ns() - start
                        _check_bounded(compacting, cell)
                        start = time.perf_counter_ns()
            elapsed += time.perf_counter_ns() - start
            cell.ops_per_ms.append(cell.changes / (elapsed / 1e6))
            stats: dict[str, int] = getattr(materializer, "stats")()  # noqa: B009 - every built-in has stats
            cell.rows_held = stats.get("rows", stats.get("elements", 0))
            cell.pending_held = stats.get("pending", 0)
            cell.misses = materializer.retract_misses
            if compacting is not None:
                compacting.finish()
                cell.conflicts = len(compacting.conflicts)
                if check_bounded:
                    _check_bounded(compacting, cell)
        finally:
            materializer.close()


def _check_bounded(materializer: CompactingMaterializer, cell: Cell) -> None:
    stats = materializer.stats()
    if stats["pending"] or stats["pending_keys"] or stats["rows"] > stats["keys"]:
        raise AssertionError(f"state not bounded after a watermark in {cell}: {stats}")
    cell.bounded_checks += 1


def markdown(cells: Sequence[Cell]) -> str:
    """One table: a row per cell, DEDUPLICATE next to the compacting behaviours."""
    lines = [
        "| workload | backend | behaviour | watermark every | changes | ops/ms (median) | runs "
        "| rows held before the last watermark | pending | conflicts | misses |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for cell in cells:
        lines.append(
            f"| {cell.workload} | {cell.backend} | {cell.behavior} | {cell.interval:,} | {cell.changes:,} "
            f"| {cell.median:.1f} | {len(cell.ops_per_ms)} | {cell.rows_held:,} | {cell.pending_held:,} "
            f"| {cell.conflicts:,} | {cell.misses:,} |"
        )
    return "\n".join(lines)


def plot(cells: Sequence[Cell], path: Path) -> None:
    """Write :func:`conflict_figure` as a PNG."""
    conflict_figure(cells).savefig(path, dpi=90)


def conflict_figure(cells: Sequence[Cell]) -> Figure:
    """Throughput and rows held against the watermark interval, one line per backend x
    behaviour; one legend below the panels, axes in plain numbers (:mod:`upsertmat.bench.figures`)."""
    from upsertmat.bench.figures import legend_below, log_values, log_x_at, new_figure

    workloads = sorted({cell.workload for cell in cells})
    figure = new_figure(11, 4 * len(workloads) + 1.2)
    axes = figure.subplots(len(workloads), 2, squeeze=False)
    for row, workload in enumerate(workloads):
        ours = [cell for cell in cells if cell.workload == workload]
        for backend in sorted({cell.backend for cell in ours}):
            for behavior in BEHAVIORS:
                line = sorted(
                    (cell for cell in ours if cell.backend == backend and cell.behavior == behavior),
                    key=lambda cell: cell.interval,
                )
                if not line:
                    continue
                x = [cell.interval for cell in line]
                style = "--" if behavior == "DEDUPLICATE" else "-"
                label = f"{behavior} {backend}"
                axes[row][0].plot(x, [cell.median for cell in line], style, marker="o", label=label)
                axes[row][1].plot(
                    x,
                    [max(cell.rows_held + cell.pending_held, 1) for cell in line],
                    style,
                    marker="o",
                    label=label,
                )
        intervals = sorted({cell.interval for cell in ours})
        for column, title in enumerate(("throughput (ops/ms, median)", "rows + pending changes held")):
            log_x_at(axes[row][column], intervals)
            log_values(axes[row][column])
            axes[row][column].set_xlabel("watermark every N changes")
            axes[row][column].set_title(f"{workload}: {title}")
            axes[row][column].grid(True, which="both", alpha=0.3)
    legend_below(figure, [axes[row][0] for row in range(len(workloads))], columns=3)
    return figure


def _ints(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def _names(choices: Sequence[str]) -> Any:
    def parse(text: str) -> list[str]:
        names = [part.strip() for part in text.split(",") if part.strip()]
        for name in names:
            if name not in choices:
                raise argparse.ArgumentTypeError(f"{name!r} is not one of {', '.join(choices)}")
        return names

    return parse


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; prints the Markdown table, writes JSON (and a PNG with ``--plot``)."""
    parser = argparse.ArgumentParser(
        prog="python tools/bench_conflict.py", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--workload", type=_names(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument(
        "--backend", type=_names([b.value for b in Backend if b is not Backend.SPARK]), default=["heap"]
    )
    parser.add_argument("--behavior", type=_names(BEHAVIORS), default=list(BEHAVIORS))
    parser.add_argument(
        "--interval", type=_ints, default=[10, 100, 1000, 10000], help="watermark every N changes"
    )
    parser.add_argument("--records", type=int, default=100_000, help="changes per workload")
    parser.add_argument("--keys", type=int, default=1000, help="sink keys of many-keys")
    parser.add_argument("--retract-delay", type=int, default=1000, help="live rows of long-history")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-bounded", action="store_true", help="check stats() after every watermark")
    parser.add_argument("--json", type=Path, help="write the cells as JSON")
    parser.add_argument("--plot", type=Path, help="write a PNG")
    args = parser.parse_args(argv)
    # Compaction misses are counted in the table; a warning per compaction would be timed too.
    # The level is restored afterwards: main() also runs inside other programs (tests).
    logger = logging.getLogger("upsertmat")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return _run(args)
    finally:
        logger.setLevel(level)


def _run(args: argparse.Namespace) -> int:
    """The benchmark of :func:`main` for parsed arguments."""
    inputs = []
    for workload in args.workload:
        if workload == "long-history":
            inputs.append(long_history(args.records, args.retract_delay, args.seed))
        else:
            inputs.append(many_keys(args.records, args.keys, args.seed))
    plan: list[tuple[Cell, Input, list[Line]]] = []
    for data in inputs:
        for interval in args.interval:
            lines = with_watermarks(data.changes, interval)
            for backend in args.backend:
                for behavior in args.behavior:
                    cell = Cell(data.name, backend, behavior, interval, len(data.changes))
                    plan.append((cell, data, lines))
    for _ in range(args.repetitions):  # alternated: one repetition of every cell at a time
        for cell, data, lines in plan:
            run_once(cell, data, lines, args.check_bounded)
    cells = [cell for cell, _, _ in plan]
    print(markdown(cells))
    if args.json is not None:
        args.json.write_text(
            json.dumps([{**asdict(cell), "median": cell.median} for cell in cells], indent=1)
        )
    if args.plot is not None:
        plot(cells, args.plot)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
