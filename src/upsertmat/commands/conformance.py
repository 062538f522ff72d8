"""``upsertmat conformance``: run the conformance suite and write a one-page report.

``--impl NAME`` (registry name, alias or ``module:factory``) or ``--cmd "PROGRAM ARGS..."``
(a program speaking replay's JSON Lines protocol). Writes ``DIR/NAME.md`` and ``DIR/NAME.json``
(per rule of docs/spec.md and per suite area: pass / FAIL / skipped and why; each failure's
minimal counterexample) and prints the Markdown path. Exit 0 when nothing failed, 1 when a
test failed, 2 on a usage error. Needs the ``conformance`` extra (pytest, Hypothesis).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from upsertmat.errors import CliError, ExitCode

NAME = "conformance"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``upsertmat conformance``."""
    parser = subparsers.add_parser(
        NAME,
        help="run the conformance suite against an implementation or a program; write a report",
        description="Run the conformance suite against an implementation (--impl) or a program "
        "speaking the JSON Lines protocol of 'upsertmat replay' (--cmd) and write a one-page "
        "Markdown and JSON report: per rule and per suite area pass / FAIL / skipped and why, "
        "with each failure's minimal counterexample. Exit 0: all passed; 1: a test failed.",
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--impl", metavar="NAME", help="STRATEGY/backend, an alias, or module:factory")
    target.add_argument("--cmd", metavar="COMMAND", help='a program, e.g. "my-engine --state-dir {STATE}"')
    parser.add_argument(
        "--ttl-granularity",
        choices=("per_element", "per_key"),
        help="with --cmd: the program's TTL granularity (default per_element)",
    )
    parser.add_argument(
        "--scenarios-in-session",
        action="store_true",
        help="with --cmd: feed the scenarios to the running program (for programs slow to start)",
    )
    parser.add_argument("--name", help="report file name and title (default: from --impl or --cmd)")
    parser.add_argument(
        "-o",
        "--output-dir",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="where NAME.md and NAME.json go (created if missing; default: the current directory)",
    )
    parser.add_argument(
        "--profile", default="upsertmat-ci", help="Hypothesis profile (default upsertmat-ci, derandomized)"
    )
    parser.add_argument(
        "-k", dest="keyword", metavar="EXPRESSION", help="only the suite tests matching (pytest's -k)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the suite, write the report, print its path."""
    from upsertmat.conformance.tools import report  # without the extra: cli.py names it

    if args.impl:
        target = [f"--upsertmat-impl={args.impl}"]
        title = args.name or args.impl
        command = f"upsertmat conformance --impl {shlex.quote(args.impl)}"
    else:
        target = [f"--upsertmat-cmd={args.cmd}"]
        if args.ttl_granularity:
            target.append(f"--upsertmat-ttl-granularity={args.ttl_granularity}")
        if args.scenarios_in_session:
            target.append("--upsertmat-scenarios-in-session")
        title = args.name or report.program_name(args.cmd)
        command = (
            f"upsertmat conformance --cmd {shlex.quote(args.cmd)}"
            + (f" --ttl-granularity {args.ttl_granularity}" if args.ttl_granularity else "")
            + (" --scenarios-in-session" if args.scenarios_in_session else "")
        )
    if args.keyword:
        command += f" -k {shlex.quote(args.keyword)}"
    try:
        written = report.write_report(
            target,
            title,
            command,
            args.output_dir,
            profile=args.profile,
            extra=["-k", args.keyword] if args.keyword else [],
            name=args.name,
        )
    except report.SuiteDidNotRun as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    except OSError as error:
        raise CliError(
            f"cannot write the report in {args.output_dir}: {error.strerror}", ExitCode.IO
        ) from None
    summary = written.data["summary"]
    print(written.markdown)
    print(
        f"upsertmat {NAME}: {summary['passed']} passed, {summary['failed']} failed, "
        f"{summary['skipped']} skipped",
        file=sys.stderr,
    )
    collector = written.collector
    if collector.failed_nodeids:
        rerun = ["pytest", *target, f"--hypothesis-profile={collector.profile or args.profile}"]
        print(
            f"upsertmat {NAME}: to rerun a failed test under pytest, from this directory: "
            f"{shlex.join([*rerun, collector.failed_nodeids[0]])}",
            file=sys.stderr,
        )
    return 1 if summary["failed"] else 0
