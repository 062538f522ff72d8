"""``upsertmat conformance-matrix``: regenerate docs/conformance-matrix.md and its JSON.

Runs ``upsertmat conformance`` for every row of :mod:`upsertmat.conformance.tools.matrix` (or the
rows ``--rows`` selects) that can run here, writes each row's report into the reports
directory, and renders the page from every row's latest report. Rows not run keep their last
result. Exit 0 when every selected row produced its report (failing cells are results, not
errors), 1 when a row's run broke, 2 on a usage error. Needs the ``conformance`` extra; the
Flink rows need ``flink`` and the Java row a JDK.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
from pathlib import Path

from upsertmat.errors import CliError, ExitCode

NAME = "conformance-matrix"


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


def run(args: argparse.Namespace) -> int:
    """Run the selected rows (:func:`upsertmat.conformance.tools.matrix.run_matrix`), then print
    the page's path."""
    from upsertmat.conformance.tools import matrix  # without the extra: cli.py names it

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

    def log(line: str) -> None:
        print(f"upsertmat {NAME}: {line}", file=sys.stderr, flush=True)

    try:
        broken = matrix.run_matrix(
            [] if args.no_run else selected, root, docs, reports, keyword=args.keyword, log=log
        )
    except (OSError, ValueError, KeyError) as error:
        detail = error.strerror if isinstance(error, OSError) else f"a report is damaged: {error}"
        raise CliError(
            f"cannot write the matrix in {docs} (reports in {reports}): {detail}", ExitCode.IO
        ) from None
    print(docs / matrix.PAGE)
    return int(ExitCode.BAD_INPUT if broken else ExitCode.OK)
