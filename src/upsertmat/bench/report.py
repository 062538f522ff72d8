"""Benchmark output: the machine description, the JSON document, the CSV file, the text table.

The JSON document (``results.json``, or stdout with ``--format json``) holds ``machine``,
``parameters``, ``results`` (one object per cell, the CSV columns plus the per-repetition
``throughputs``), ``goals`` and ``unavailable`` (requested implementations the registry
cannot build). Throughputs are records per millisecond (ops/ms); ``median_*``, ``min_*``...
and the goals are on the run's ``clock`` (``wall`` by default), and both clocks' medians and
per-repetition values are always included. Memory: ``state_bytes_per_row`` (the state's bytes
per live row at the end of the workload: ``state_bytes_method`` ``traced`` on heap, ``disk``
on rocksdb and lmdb, with ``lmdb_pages``), ``live_rows`` and ``peak_rss_mb`` (the process's
peak RSS when the cell ended, MiB).
"""

from __future__ import annotations

import csv
import datetime
import os
import platform
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ..impls.build import build_name
from .goals import NOT_RUN, GoalCheck
from .runner import FLIP544, MANY_KEYS, CellResult
from .stats import Summary

CSV_COLUMNS = (
    "strategy",
    "backend",
    "upsert_key",
    "retract_delay",
    "retract_percentage",
    "status",
    "clock",
    "records",
    "repetitions",
    "median_ops_per_ms",
    "min_ops_per_ms",
    "max_ops_per_ms",
    "q1_ops_per_ms",
    "q3_ops_per_ms",
    "partial_ops_per_ms",
    "wall_median_ops_per_ms",
    "cpu_median_ops_per_ms",
    "partial_records",
    "history_start",
    "history_end",
    "history_mean",
    "elapsed_s",
    "note",
    "workload",
    "state_bytes_per_row",
    "state_bytes_method",
    "live_rows",
    "lmdb_pages",
    "peak_rss_mb",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.strip() or None


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """What the numbers depend on: CPU, cores, Python, engine versions, the build (compiled or
    pure Python, :func:`~upsertmat.impls.build.build_name`), date, commit."""
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "upsertmat": _version("upsertmat"),
        "build": build_name(),
        "rocksdict": _version("rocksdict"),
        "lmdb": _version("lmdb"),
        "git_commit": _git_commit(),
    }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else float(f"{value:.{digits}g}")


def result_row(result: CellResult) -> dict[str, Any]:
    """One cell as a flat mapping with the :data:`CSV_COLUMNS` keys."""
    summary = result.summary
    cell = result.cell
    return {
        "strategy": cell.strategy.value,
        "backend": cell.backend.value,
        "upsert_key": cell.upsert_key,
        "retract_delay": cell.retract_delay,
        "retract_percentage": cell.retract_percentage,
        "status": result.status,
        "clock": result.clock,
        "records": result.records,
        "repetitions": len(result.throughputs),
        "median_ops_per_ms": _round(summary.median) if summary else None,
        "min_ops_per_ms": _round(summary.minimum) if summary else None,
        "max_ops_per_ms": _round(summary.maximum) if summary else None,
        "q1_ops_per_ms": _round(summary.q1) if summary else None,
        "q3_ops_per_ms": _round(summary.q3) if summary else None,
        "partial_ops_per_ms": _round(result.partial_throughput),
        "wall_median_ops_per_ms": _round(result.median_on("wall")),
        "cpu_median_ops_per_ms": _round(result.median_on("cpu")),
        "partial_records": result.partial_records,
        "history_start": result.history.start,
        "history_end": result.history.end,
        "history_mean": round(result.history.mean, 1),
        "elapsed_s": round(result.elapsed_s, 2),
        "note": result.note,
        "workload": cell.workload,
        "state_bytes_per_row": None
        if result.state_bytes_per_row is None
        else round(result.state_bytes_per_row, 1),
        "state_bytes_method": result.state_bytes_method,
        "live_rows": result.live_rows,
        "lmdb_pages": result.lmdb_pages,
        "peak_rss_mb": round(result.peak_rss_bytes / 2**20, 1),
    }


def goal_row(check: GoalCheck) -> dict[str, Any]:
    """One goal check as a JSON object."""
    return {
        "goal": check.goal,
        "subject": check.subject,
        "measured": _round(check.measured),
        "target": check.target,
        "status": check.status,
        "bound": check.bound,
        "margin": _round(check.margin, 3),
        "detail": check.detail,
    }


def document(
    machine: Mapping[str, Any],
    parameters: Mapping[str, Any],
    results: Iterable[CellResult],
    goals: Iterable[GoalCheck],
    unavailable: Sequence[str],
) -> dict[str, Any]:
    """The JSON document of a run."""
    rows = []
    for result in results:
        row = result_row(result)
        row["wall_throughputs_ops_per_ms"] = [_round(value) for value in result.wall_throughputs]
        row["cpu_throughputs_ops_per_ms"] = [_round(value) for value in result.cpu_throughputs]
        rows.append(row)
    return {
        "tool": "upsertmat bench",
        "unit": "ops/ms (timed records per millisecond)",
        "machine": dict(machine),
        "parameters": dict(parameters),
        "results": rows,
        "goals": [goal_row(check) for check in goals],
        "unavailable": list(unavailable),
    }


def write_csv(path: Path, results: Iterable[CellResult]) -> None:
    """One row per cell, columns :data:`CSV_COLUMNS`; booleans as ``true``/``false``, None empty."""
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for result in results:
            row = result_row(result)
            row["upsert_key"] = "true" if row["upsert_key"] else "false"
            writer.writerow({key: "" if value is None else value for key, value in row.items()})


def _number(value: float | None) -> str:
    """A throughput as people read it: ``3,070``, ``127``, ``12.7``, ``0.512`` (three significant
    digits below 1,000, whole numbers with thousands separators above), ``-`` for None."""
    if value is None:
        return "-"
    if abs(value) >= 999.5:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def _spread(summary: Summary) -> str:
    """``min..max`` of a sample, or ``-`` for a single repetition (no spread to show)."""
    if summary.n < 2:
        return "-"
    return f"{_number(summary.minimum)}..{_number(summary.maximum)}"


def _bytes_per_row(result: CellResult) -> str:
    return "-" if result.state_bytes_per_row is None else f"{result.state_bytes_per_row:,.0f}"


def results_table(results: Iterable[CellResult]) -> str:
    """A fixed-width text table: one line per cell, throughput in ops/ms (records per
    millisecond), state bytes per live row and the process's peak RSS (MiB).

    ``median``, ``min..max`` and ``IQR`` (the interquartile range ``q3 - q1``, one number;
    ``-`` for a single repetition) are on the run's clock; ``history`` is the history length at
    the start and end of the timed part; ``wall/cpu`` the medians on both clocks (close to each
    other when the machine was not busy); ``B/row`` the state's bytes per live row at the end
    (heap: traced; rocksdb, lmdb: on disk).
    """
    header = (
        f"{'implementation':<18} {'ukey':<4} {'pct':>3} {'delay':>5} {'history':>11} "
        f"{'median':>8} {'min..max':>17} {'IQR':>7} {'wall/cpu':>15} {'reps':>4} "
        f"{'B/row':>7} {'RSS MiB':>7}  status"
    )
    lines = ["throughput in ops/ms (records per millisecond); B/row: state bytes per live row", header]
    lines.append("-" * len(header))
    for result in results:
        cell, summary = result.cell, result.summary
        history = f"{result.history.start}->{result.history.end}"
        if summary is not None:
            median = _number(summary.median)
            spread = _spread(summary)
            iqr = _number(summary.iqr) if summary.n >= 2 else "-"
        else:
            median = "~" + _number(result.partial_throughput) if result.partial_throughput else "-"
            spread = iqr = "-"
        status = result.status + (f" ({result.note})" if result.note else "")
        if cell.workload == MANY_KEYS:
            status = f"{MANY_KEYS} workload; {status}"
            pct, delay = "-", "-"
        else:
            pct, delay = str(cell.retract_percentage), str(cell.retract_delay)
        clocks = _number(result.median_on("wall")) + "/" + _number(result.median_on("cpu"))
        rss = f"{result.peak_rss_bytes / 2**20:,.0f}" if result.peak_rss_bytes else "-"
        lines.append(
            f"{cell.implementation:<18} {'on' if cell.upsert_key else 'off':<4} {pct:>3} "
            f"{delay:>5} {history:>11} {median:>8} {spread:>17} {iqr:>7} "
            f"{clocks:>15} {len(result.throughputs):>4} {_bytes_per_row(result):>7} {rss:>7}  {status}"
        )
    return "\n".join(lines)


def _not_run_line(checks: Sequence[GoalCheck]) -> str | None:
    """One line naming the goals whose cells this run did not include (a smaller grid), or None."""
    names = [check.goal for check in checks if check.status == NOT_RUN]
    if not names:
        return None
    return f"goals not checked (this run has none of their cells): {', '.join(names)}"


def goals_table(checks: Iterable[GoalCheck]) -> str:
    """The goal checks, one per line: goal, subject, measured vs target, status, margin; the
    goals whose cells were not run are named on one last line."""
    checks = list(checks)
    lines = []
    for check in checks:
        if check.status == NOT_RUN:
            continue
        if check.measured is None:
            lines.append(f"{check.status:<12} {check.goal:<9} {check.detail}")
            continue
        bound = {"upper": "<=", "lower": ">=", "unknown": "~"}.get(check.bound, "")
        margin = f"{check.margin:+.0%}" if check.margin is not None else ""
        lines.append(
            f"{check.status:<12} {check.goal:<9} {check.subject}: {bound}{_number(check.measured)} "
            f"(target >= {check.target:g}, margin {margin}) {check.detail}"
        )
    skipped = _not_run_line(checks)
    if skipped:
        lines.append(skipped)
    return "\n".join(lines)


def _md_cell(result: CellResult) -> str:
    summary = result.summary
    if summary is not None:
        spread = _spread(summary)
        return _number(summary.median) if spread == "-" else f"{_number(summary.median)} ({spread})"
    if result.partial_throughput:
        return f"<= {_number(result.partial_throughput)} (partial)"
    return result.status


def markdown_report(results: Sequence[CellResult], checks: Iterable[GoalCheck]) -> str:
    """Markdown: per backend, a table of median (min..max) ops/ms, one row per strategy,
    upsert key and percentage, one column per retract_delay; then the many-keys workload (one
    row per strategy and upsert key, one column per backend); then the memory of every
    measured cell (state bytes per live row, peak RSS); then the goal checks (those whose cells
    were not run named on one line)."""
    checks = list(checks)
    lines: list[str] = []
    flip = [result for result in results if result.cell.workload == FLIP544]
    backends = list(dict.fromkeys(result.cell.backend for result in flip))
    for backend in backends:
        mine = [result for result in flip if result.cell.backend is backend]
        delays = sorted({result.cell.retract_delay for result in mine})
        lines += [
            f"#### {backend.value}",
            "",
            "| strategy | upsert key | retract % | " + " | ".join(f"delay {d}" for d in delays) + " |",
            "|---|---|---:|" + "---:|" * len(delays),
        ]
        rows: dict[tuple[str, bool, int], dict[int, str]] = {}
        for result in mine:
            key = (result.cell.strategy.value, result.cell.upsert_key, result.cell.retract_percentage)
            rows.setdefault(key, {})[result.cell.retract_delay] = _md_cell(result)
        for (strategy, upsert_key, percentage), by_delay in rows.items():
            values = " | ".join(by_delay.get(delay, "") for delay in delays)
            lines.append(f"| {strategy} | {'on' if upsert_key else 'off'} | {percentage} | {values} |")
        lines.append("")
    many = [result for result in results if result.cell.workload == MANY_KEYS]
    if many:
        backends = list(dict.fromkeys(result.cell.backend for result in many))
        lines += [
            f"#### {MANY_KEYS}",
            "",
            "| strategy | upsert key | " + " | ".join(backend.value for backend in backends) + " |",
            "|---|---|" + "---:|" * len(backends),
        ]
        by_row: dict[tuple[str, bool], dict[str, str]] = {}
        for result in many:
            row_key = (result.cell.strategy.value, result.cell.upsert_key)
            by_row.setdefault(row_key, {})[result.cell.backend.value] = _md_cell(result)
        for (strategy, upsert_key), by_backend in by_row.items():
            values = " | ".join(by_backend.get(backend.value, "") for backend in backends)
            lines.append(f"| {strategy} | {'on' if upsert_key else 'off'} | {values} |")
        lines.append("")
    measured = [result for result in results if result.state_bytes_per_row is not None]
    if measured:
        lines += [
            "#### memory",
            "",
            "| cell | live rows | state bytes / live row | method | peak RSS (MiB) |",
            "|---|---:|---:|---|---:|",
        ]
        for result in measured:
            label = result.cell.label()
            rss = f"{result.peak_rss_bytes / 2**20:,.0f}"
            method = result.state_bytes_method
            if result.lmdb_pages is not None:
                method += f", {result.lmdb_pages:,} pages"
            lines.append(f"| {label} | {result.live_rows:,} | {_bytes_per_row(result)} | {method} | {rss} |")
        lines.append("")
    lines += ["| goal | subject | measured | target | status | margin |", "|---|---|---:|---:|---|---:|"]
    for check in checks:
        if check.status == NOT_RUN:
            continue
        value = _number(check.measured)
        if check.bound in ("upper", "lower"):
            value = ("<= " if check.bound == "upper" else ">= ") + value
        margin = "-" if check.margin is None else f"{check.margin:+.0%}"
        lines.append(
            f"| {check.goal} | {check.subject} | {value} | {check.target:g} | {check.status} | {margin} |"
        )
    skipped = _not_run_line(checks)
    if skipped:
        lines += ["", skipped]
    return "\n".join(lines)
