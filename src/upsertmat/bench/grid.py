"""The strategy benchmark as one call: run a :class:`~.runner.Plan`, check the goals, write the files.

:func:`run_grid` is what ``upsertmat bench`` does once its options are parsed: it runs every
cell (:func:`~.runner.run_plan`, progress to a :class:`~.runner.ProgressSink`), checks the
FLIP-544 goals (:mod:`.goals`), and writes ``results.json``, ``results.csv`` and, when
matplotlib (the ``bench`` extra) is installed, ``throughput-<backend>.png`` into the output
directory. The command renders the returned :class:`Grid`. An output directory that cannot be
created is a :class:`~upsertmat.errors.CliError` (exit 4), said before anything runs.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ..errors import CliError, ExitCode
from ..impls import Backend
from .goals import GoalCheck, check_goals
from .report import document, machine_info, write_csv
from .runner import FLIP544, CellResult, Plan, ProgressSink, run_plan

QUICK_GOALS_NOTE = (
    "indicative only: --quick times one short repetition per cell, too few records to decide a "
    "goal on a machine that may be busy; measure with the full preset (or --records and "
    "--repetitions) before trusting PASS or MISS"
)


@dataclass(frozen=True)
class Grid:
    """A finished run: every cell's result, the goal checks, the JSON document, the files written."""

    results: list[CellResult]
    goals: list[GoalCheck]
    document: dict[str, Any]
    machine: dict[str, Any]
    written: list[Path]


def plots_available() -> bool:
    """True if matplotlib (the ``bench`` extra) is installed: only the PNG plots need it."""
    return importlib.util.find_spec("matplotlib") is not None


def plan_parameters(plan: Plan) -> dict[str, Any]:
    """The plan as JSON-ready parameters."""
    parameters = asdict(plan)
    parameters["pairs"] = [f"{s.value}/{b.value}" for s, b in plan.pairs]
    parameters["tmp_root"] = str(plan.tmp_root) if plan.tmp_root else None
    parameters["cells"] = len(plan.cells())
    parameters["workloads"] = list(plan.workloads)
    parameters["many_keys"] = asdict(plan.many_keys) if plan.many_keys is not None else None
    return parameters


def write_plots(plan: Plan, flip: list[CellResult], machine: dict[str, Any], output: Path) -> list[Path]:
    """``throughput-<backend>.png`` per backend with a measured FLIP-544 cell; the paths written."""
    from .plot import plot_backend  # matplotlib takes ~1 s to import: only when plotting

    plots = []
    for backend in sorted({cell.backend for cell in plan.cells()}, key=list(Backend).index):
        path = output / f"throughput-{backend.value}.png"
        if plot_backend(path, backend, flip, machine, plan.records, plan.payload_size):
            plots.append(path)
    return plots


def run_grid(
    plan: Plan,
    output: Path,
    *,
    unavailable: Sequence[str] = (),
    quick: bool = False,
    progress: ProgressSink | None = None,
) -> Grid:
    """Run ``plan``, write its files into ``output`` (created), return what was measured.

    ``unavailable``: the requested implementations nobody registered (recorded in the
    document); ``quick``: the smoke preset ran (the goals are marked indicative)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"cannot create output directory {output}: {error.strerror}", ExitCode.IO) from None
    machine = machine_info()
    results = run_plan(plan, progress)
    flip = [result for result in results if result.cell.workload == FLIP544]
    goals = check_goals(flip)
    doc = document(machine, plan_parameters(plan), results, goals, unavailable)
    if quick:
        doc["goals_note"] = QUICK_GOALS_NOTE
    (output / "results.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    write_csv(output / "results.csv", results)
    plots = write_plots(plan, flip, machine, output) if plots_available() else []
    return Grid(results, goals, doc, machine, [output / "results.csv", output / "results.json", *plots])
