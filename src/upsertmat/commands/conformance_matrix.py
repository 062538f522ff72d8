"""``upsertmat conformance-matrix``: regenerate docs/conformance-matrix.md and its JSON.

Runs ``upsertmat conformance`` for every row of :mod:`upsertmat.conformance.matrix` (or the
rows ``--rows`` selects) that can run here, writes each row's report into the reports
directory, and renders the page from every row's latest report. Rows not run keep their last
result. Exit 0 when every selected row produced its report (failing cells are results, not
errors), 1 when a row's run broke, 2 on a usage error. Needs the ``conformance`` extra; the
Flink rows need ``flink`` and the Java row a JDK.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from pathlib import Path
from typing import Any

from upsertmat.errors import CliError, ExitCode

NAME = "conformance-matrix"
PAGE = "conformance-matrix.md"
DATA = "conformance-matrix.json"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``upsertmat conformance-matrix``."""
    parser = subparsers.add_parser(
        NAME,
        help="run the conformance suite for every implementation and engine; write the matrix page",
        description="Run the conformance suite against every implementation of the matrix (our "
        "strategy/backend pairs, upsertmat replay, the Java example, Apache Flink 2.3.0 per strategy "
        "and state backend), write each one's report, and regenerate DOCS/conformance-matrix.md and "
        ".json. Rows that need what is not installed are left out; rows not run keep their last result. "
        "Slow: the whole matrix takes one to two hours (the Flink rows most of it).",
    )
    parser.add_argument(
        "-o",
        "--docs",
        type=Path,
        default=Path("docs"),
        metavar="DIR",
        help="where the page and its JSON go (default: docs)",
    )
    parser.add_argument(
        "--reports",
        type=Path,
        metavar="DIR",
        help="where the rows' reports go (default: DOCS/conformance-reports)",
    )
    parser.add_argument(
        "--rows",
        action="append",
        metavar="PATTERN",
        help="run only the rows whose name matches (shell pattern, repeatable; --list shows the names)",
    )
    parser.add_argument(
        "-k",
        dest="keyword",
        metavar="EXPRESSION",
        help="only the suite tests matching (pytest's -k), every row",
    )
    parser.add_argument("--list", action="store_true", help="list the rows and whether each can run here")
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="run nothing: render the page again from the reports and the matrix's JSON",
    )
    parser.set_defaults(run=run)


def _previous_runs(path: Path) -> dict[str, dict[str, Any]]:
    """The run records of the matrix's last JSON (empty if there is none or it is unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {row["name"]: row["run"] for row in data["rows"] if row.get("run")}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _refresh_reports(reports: Path, names: list[str]) -> None:
    """Render each row's report page again from its JSON with this version's rule table and
    page layout, so that every page the matrix links to reads alike."""
    from upsertmat.conformance import report

    for name in names:
        path = reports / f"{name}.json"
        if path.is_file():
            data = report.refreshed(json.loads(path.read_text(encoding="utf-8")))
            path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            (reports / f"{name}.md").write_text(report.render_markdown(data, name), encoding="utf-8")


def _write(docs: Path, reports: Path, all_rows: list[Any], runs: dict[str, dict[str, Any]]) -> None:
    from upsertmat.conformance import matrix

    try:
        _refresh_reports(reports, [row.name for row in all_rows if row.name in runs])
    except (OSError, ValueError, KeyError) as error:
        raise CliError(f"cannot refresh the reports in {reports}: {error}", ExitCode.IO) from None
    shown = os.path.relpath(reports, docs)
    data = matrix.matrix_json(all_rows, reports, runs, os.path.relpath(reports))
    try:
        (docs / DATA).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
        (docs / PAGE).write_text(matrix.render(data, shown), encoding="utf-8")
    except OSError as error:
        raise CliError(f"cannot write the matrix in {docs}: {error.strerror}", ExitCode.IO) from None


def run(args: argparse.Namespace) -> int:
    """Run the selected rows, then write the page and its JSON."""
    try:
        from upsertmat.conformance import matrix
    except ImportError as error:
        raise CliError(
            f"the conformance suite needs its extra: pip install 'upsertmat[conformance]' ({error})",
            ExitCode.USAGE,
        ) from None
    root = Path.cwd()
    docs: Path = args.docs
    reports: Path = args.reports or docs / "conformance-reports"
    all_rows = matrix.rows()
    selected = [
        row for row in all_rows if not args.rows or any(fnmatch.fnmatch(row.name, p) for p in args.rows)
    ]
    if args.rows and not selected:
        names = ", ".join(row.name for row in all_rows)
        raise CliError(f"--rows {' '.join(args.rows)} matches no row; the rows: {names}")
    if args.list:
        for row in all_rows:
            why = matrix.missing(row, root)
            print(f"{row.name}\t{'cannot run here: ' + why if why else 'can run'}")
        return int(ExitCode.OK)
    try:
        docs.mkdir(parents=True, exist_ok=True)
        reports.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"cannot create {reports}: {error.strerror}", ExitCode.IO) from None
    runs = _previous_runs(docs / DATA)
    broken = 0
    for number, row in enumerate([] if args.no_run else selected, 1):
        why = matrix.missing(row, root)
        prefix = f"upsertmat {NAME}: [{number}/{len(selected)}] {row.name}"
        if why is not None:
            print(f"{prefix}: left out: {why}", file=sys.stderr, flush=True)
            continue
        print(f"{prefix}: running ({row.profile})", file=sys.stderr, flush=True)
        try:
            runs[row.name] = matrix.run_row(row, root, reports, args.keyword)
        except (RuntimeError, OSError) as error:
            broken += 1
            print(f"{prefix}: {error}", file=sys.stderr, flush=True)
            continue
        summary = json.loads((reports / f"{row.name}.json").read_text(encoding="utf-8"))["summary"]
        print(
            f"{prefix}: {summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped "
            f"({runs[row.name]['seconds']} s)",
            file=sys.stderr,
            flush=True,
        )
        _write(docs, reports, all_rows, runs)  # after every row: an interrupted run keeps what it did
    _write(docs, reports, all_rows, runs)
    print(docs / PAGE)
    return int(ExitCode.BAD_INPUT if broken else ExitCode.OK)
