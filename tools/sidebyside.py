"""Two builds side by side: the same benchmark cells, alternated, medians and ratios.

``python tools/sidebyside.py --old OLD/bin/upsertmat --new NEW/bin/upsertmat``
runs every cell of :data:`DEFAULT_CELLS` (or ``--cell`` ones) once per round with each
build's own ``upsertmat bench`` (a fresh process each, one repetition), alternating which
build goes first from round to round so a slow spell of a shared machine hits both alike.
Each run records wall and process-CPU throughput; the report gives per cell the median over
the rounds for each build and clock, and the ratio new/old of the medians. Output: a
markdown table on stdout, ``sidebyside.json`` and ``sidebyside.png`` (ratios per cell, both
clocks) in ``--output-dir``. Cells: ``STRATEGY/backend:workload[:delay][:nokey][:async]`` with
workload ``flip544`` (100% retraction, the delay the history length; upsert key on unless
``nokey``) or ``many-keys`` (``--changes``/``--keys``). ``--grid full`` is every strategy on
every backend at delays 2, 10, 100 and 1,000, upsert key on and off (120 cells; about 40
minutes per round on 2 cores). The old build has no many-keys workload, so a
many-keys cell compares the *new* build with itself: with ``async`` its "new" side runs
with ``--async-state`` and its "old" side without (the async-state goal), else both sides
run the same (a noise check). ``--checkpoint-interval N`` passes the commit interval to
every run of the new build (the old build commits after every input and has no such
option); without it the new build runs at its ``bench`` default. An old build whose ``bench``
has ``--checkpoint-interval`` gets the same interval.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

DEFAULT_CELLS = (
    "LEGACY/heap:flip544:2",
    "LEGACY/heap:flip544:1000",
    "VALUE/heap:flip544:2",
    "VALUE/heap:flip544:1000",
    "MAP/heap:flip544:2",
    "MAP/heap:flip544:1000",
    "SORTED/heap:flip544:2",
    "SORTED/heap:flip544:1000",
    "ADAPTIVE/heap:flip544:2",
    "ADAPTIVE/heap:flip544:1000",
    "MAP/rocksdb:flip544:1000",
    "MAP/rocksdb:flip544:5000",
    "SORTED/rocksdb:flip544:1000",
    "ADAPTIVE/rocksdb:flip544:2",
    "VALUE/rocksdb:flip544:2",
    "LEGACY/rocksdb:flip544:2",
    "MAP/lmdb:flip544:1000",
    "MAP/lmdb:flip544:5000",
    "SORTED/lmdb:flip544:1000",
    "MAP/rocksdb:many-keys:async",
    "VALUE/rocksdb:many-keys:async",
    "ADAPTIVE/rocksdb:many-keys:async",
)


FULL_GRID = tuple(
    f"{strategy}/{backend}:flip544:{delay}{suffix}"
    for backend in ("heap", "rocksdb", "lmdb")
    for strategy in ("LEGACY", "VALUE", "MAP", "SORTED", "ADAPTIVE")
    for suffix in ("", ":nokey")
    for delay in (2, 10, 100, 1000)
)
"""``--grid full``: 5 strategies x 3 backends x history 2/10/100/1,000 x upsert key on/off."""


@dataclass(frozen=True)
class CellSpec:
    """One cell: implementation, workload, history length (flip544), async state (new build),
    upsert key."""

    implementation: str
    workload: str
    delay: int = 0
    async_state: bool = False
    upsert_key: bool = True

    @classmethod
    def parse(cls, text: str) -> CellSpec:
        """``STRATEGY/backend:workload[:delay][:nokey][:async]``; ValueError if malformed."""
        parts = text.split(":")
        if len(parts) < 2 or "/" not in parts[0] or parts[1] not in ("flip544", "many-keys"):
            raise ValueError(f"bad cell {text!r}: expected STRATEGY/backend:flip544:DELAY or ...:many-keys")
        async_state = parts[-1] == "async"
        rest = parts[2:-1] if async_state else parts[2:]
        upsert_key = "nokey" not in rest
        rest = [part for part in rest if part != "nokey"]
        if parts[1] == "flip544" and (len(rest) != 1 or not rest[0].isdigit()):
            raise ValueError(f"bad cell {text!r}: a flip544 cell needs a delay")
        return cls(parts[0], parts[1], int(rest[0]) if rest else 0, async_state, upsert_key)

    @property
    def label(self) -> str:
        """A short label, e.g. ``MAP/rocksdb d=1000`` or ``MAP/rocksdb many-keys async``."""
        key = "" if self.upsert_key else " nokey"
        if self.workload == "flip544":
            return f"{self.implementation} d={self.delay}{key}{' async' if self.async_state else ''}"
        return f"{self.implementation} many-keys{key}{' async on/off' if self.async_state else ''}"


@dataclass
class Samples:
    """Throughputs (ops/ms) of one build in one cell, per clock."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def bench_argv(
    cell: CellSpec,
    records: int,
    changes: int,
    keys: int,
    new: bool,
    output: Path,
    checkpoint_interval: int | None = None,
    old_takes_interval: bool = False,
) -> list[str]:
    """The ``upsertmat bench`` arguments of one run of ``cell`` (``checkpoint_interval``: the
    new build's commit interval, None for its default; the old build's too if
    ``old_takes_interval``)."""
    strategy, backend = cell.implementation.split("/")
    upsert_key = "on" if cell.upsert_key else "off"
    argv = ["bench", "--strategy", strategy, "--backend", backend, "--upsert-key", upsert_key]
    if checkpoint_interval is not None and (new or old_takes_interval or cell.workload == "many-keys"):
        argv += ["--checkpoint-interval", str(checkpoint_interval)]
    argv += ["--repetitions", "1", "--max-seconds-per-cell", "600", "--quiet", "--format", "json"]
    argv += ["--output-dir", str(output)]
    if cell.workload == "flip544":
        argv += ["--retract-delay", str(cell.delay), "--retract-percentage", "100"]
        argv += ["--records", str(records)]
        if new:
            argv += ["--workload", "flip544"]
    else:
        argv += ["--workload", "many-keys", "--changes", str(changes), "--keys", str(keys)]
        if cell.async_state and new:
            argv.append("--async-state")
    return argv


def takes_interval(command: str) -> bool:
    """Whether the build ``command``'s ``bench`` has ``--checkpoint-interval``."""
    completed = subprocess.run([command, "bench", "--help"], capture_output=True, text=True, check=False)
    return "--checkpoint-interval" in completed.stdout


def run_once(command: str, argv: list[str]) -> tuple[float, float]:
    """One ``upsertmat bench`` run: (wall, cpu) ops/ms of its single cell."""
    completed = subprocess.run([command, *argv], capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"{command} {' '.join(argv)} failed: {completed.stderr.strip()[-500:]}")
    result = json.loads(completed.stdout)["results"][0]
    if result["status"] != "ok":
        raise RuntimeError(f"{command} {' '.join(argv)}: cell {result['status']} ({result['note']})")
    return result["wall_throughputs_ops_per_ms"][0], result["cpu_throughputs_ops_per_ms"][0]


def median(values: Sequence[float]) -> float | None:
    """The median, or None for no values."""
    return statistics.median(values) if values else None


def ratio(new: float | None, old: float | None) -> float | None:
    """New / old, or None."""
    return None if new is None or old is None or old == 0 else new / old


def report_rows(cells: Sequence[CellSpec], samples: dict[tuple[str, str], Samples]) -> list[dict[str, Any]]:
    """Per cell: medians per build and clock, and the ratios new/old."""
    rows = []
    for cell in cells:
        old, new = samples[(cell.label, "old")], samples[(cell.label, "new")]
        row: dict[str, Any] = {"cell": cell.label, "rounds": len(new.wall)}
        for clock in ("wall", "cpu"):
            old_median, new_median = median(getattr(old, clock)), median(getattr(new, clock))
            row[f"old_{clock}"], row[f"new_{clock}"] = old_median, new_median
            row[f"ratio_{clock}"] = ratio(new_median, old_median)
        rows.append(row)
    return rows


def _fmt(value: float | None, suffix: str = "") -> str:
    return "-" if value is None else f"{value:.3g}{suffix}"


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    """The side-by-side table (medians in ops/ms; ratios new/old)."""
    lines = [
        "| cell | old wall | new wall | ratio wall | old CPU | new CPU | ratio CPU | rounds |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row['cell']} | {_fmt(row['old_wall'])} | {_fmt(row['new_wall'])} | "
            f"{_fmt(row['ratio_wall'], 'x')} | {_fmt(row['old_cpu'])} | {_fmt(row['new_cpu'])} | "
            f"{_fmt(row['ratio_cpu'], 'x')} | {row['rounds']} |"
        )
    return "\n".join(lines)


def plot(path: Path, rows: Sequence[dict[str, Any]], title: str) -> None:
    """Write :func:`ratio_figure` as a PNG."""
    ratio_figure(rows, title).savefig(path, dpi=100)


def ratio_figure(rows: Sequence[dict[str, Any]], title: str) -> Figure:
    """Horizontal bars of the ratios new/old per cell, wall and CPU, with a line at 1x; the
    legend below the axes (:mod:`upsertmat.bench.figures`)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    from upsertmat.bench.figures import legend_below, new_figure

    figure = new_figure(9, 0.42 * len(rows) + 2.0)
    axes = figure.subplots()
    positions = list(range(len(rows)))
    for offset, clock in ((-0.2, "wall"), (0.2, "cpu")):
        values = [row[f"ratio_{clock}"] or 0.0 for row in rows]
        axes.barh([p + offset for p in positions], values, height=0.38, label=f"{clock} clock")
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_xscale("log")
    axes.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 7.0)))
    axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}x"))
    axes.xaxis.set_minor_formatter(NullFormatter())  # the log scale's own labels ("4x10^0") otherwise
    axes.set_yticks(positions, [row["cell"] for row in rows], fontsize="small")
    axes.invert_yaxis()
    axes.set_xlabel("throughput ratio new / old (median of alternated rounds; > 1x is faster)")
    axes.grid(True, axis="x", which="both", alpha=0.3)
    axes.set_title(title, fontsize="medium")
    legend_below(figure, [axes])
    return figure


def main(argv: Sequence[str] | None = None) -> int:
    """Run the side-by-side comparison the options describe."""
    parser = argparse.ArgumentParser(prog="python tools/sidebyside.py", description=__doc__)
    parser.add_argument("--old", required=True, help="the old build's upsertmat executable")
    parser.add_argument("--new", required=True, help="the new build's upsertmat executable")
    parser.add_argument("--cell", action="append", help="a cell (repeatable; default: the standard set)")
    parser.add_argument(
        "--grid", choices=("standard", "full"), default="standard", help="the cells without --cell"
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds (default 3)")
    parser.add_argument("--records", type=int, default=5000, help="flip544 timed records (default 5000)")
    parser.add_argument("--slow-records", type=int, default=1000, help="records of LEGACY at delay >= 1000")
    parser.add_argument("--changes", type=int, default=200_000, help="many-keys changes (default 200,000)")
    parser.add_argument("--keys", type=int, default=20_000, help="many-keys sink keys (default 20,000)")
    parser.add_argument(
        "--checkpoint-interval",
        type=int,
        help="the new build's rocksdb/lmdb commit interval (default: its bench default; 1 = a "
        "commit per input, like the old build)",
    )
    parser.add_argument("--output-dir", type=Path, default=Path("sidebyside"))
    args = parser.parse_args(argv)
    cells = [
        CellSpec.parse(text) for text in (args.cell or (FULL_GRID if args.grid == "full" else DEFAULT_CELLS))
    ]
    old_takes_interval = takes_interval(args.old)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    samples = {(cell.label, build): Samples() for cell in cells for build in ("old", "new")}
    with tempfile.TemporaryDirectory(prefix="upsertmat-sidebyside-") as tmp:
        for round_number in range(args.rounds):
            for index, cell in enumerate(cells):
                slow = cell.implementation.startswith("LEGACY/") and cell.delay >= 1000
                records = args.slow_records if slow else args.records
                order = ("old", "new") if (round_number + index) % 2 == 0 else ("new", "old")
                for build in order:
                    many = cell.workload == "many-keys"  # the old build lacks it: new vs new
                    command = args.old if build == "old" and not many else args.new
                    output = Path(tmp) / build
                    interval = args.checkpoint_interval
                    run = bench_argv(
                        cell,
                        records,
                        args.changes,
                        args.keys,
                        build == "new",
                        output,
                        interval,
                        old_takes_interval,
                    )
                    wall, cpu = run_once(command, run)
                    samples[(cell.label, build)].wall.append(wall)
                    samples[(cell.label, build)].cpu.append(cpu)
                old_wall, new_wall = samples[(cell.label, "old")].wall, samples[(cell.label, "new")].wall
                print(
                    f"round {round_number + 1}/{args.rounds} {cell.label}: "
                    f"old {old_wall[-1]:.3g} new {new_wall[-1]:.3g} ops/ms wall",
                    file=sys.stderr,
                    flush=True,
                )
    rows = report_rows(cells, samples)
    document = {
        "parameters": {key: str(value) for key, value in vars(args).items()},
        "rows": rows,
        "samples": {f"{label}|{build}": vars(s) for (label, build), s in samples.items()},
    }
    (args.output_dir / "sidebyside.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    plot(args.output_dir / "sidebyside.png", rows, "upsertmat: new build vs old build, cells alternated")
    print(markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
