"""``compile-plan``, ``explain-plan`` and ``execute-plan``: per-operator state TTL via a JSON plan.

``upsertmat compile-plan JOB -o plan.json`` resolves a job file (with the same configuration
layers as ``run``) and writes its operators; a user edits a state entry's ``ttl``;
``upsertmat explain-plan plan.json`` validates the plan and prints operators, keys, strategy
and TTLs; ``upsertmat execute-plan plan.json`` runs it. See ``docs/plans.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from upsertmat.commands.options import add_config_arguments
from upsertmat.commands.run import (
    add_job_arguments,
    add_run_arguments,
    cli_layers,
    execute,
    job_from_args,
    options_of,
)
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError
from upsertmat.jobs.loader import with_overrides
from upsertmat.jobs.model import JobSpec
from upsertmat.plan.codec import plan_to_json, read_plan, write_plan
from upsertmat.plan.compiler import compile_job, job_of_plan
from upsertmat.plan.explain import explain
from upsertmat.plan.model import Plan, PlanError
from upsertmat.replay.failures import io_exit_code
from upsertmat.stdout import cut_short, write_data

COMPILE, EXPLAIN, EXECUTE = "compile-plan", "explain-plan", "execute-plan"
EXIT_CODES = (
    "exit codes: 0 ok, 2 usage error (bad flags, a job file or plan that cannot be used), 4 I/O error\n"
    "  (the plan or stdout cannot be written: a full disk, a device error), 70 internal error,\n"
    "  141 stdout's reader went away."
)


def load_plan(path: Path) -> tuple[Plan, JobSpec]:
    """Read, validate and resolve a plan file. CliError (usage) on any problem."""
    try:
        plan = read_plan(path)
        return plan, job_of_plan(plan, path.resolve().parent, f"plan {path}")
    except (PlanError, ConfigError) as error:
        raise CliError(str(error), ExitCode.USAGE) from None


def run_compile(args: argparse.Namespace) -> int:
    """``compile-plan``: write the job's plan to ``--output`` (stdout if ``-``)."""
    plan = compile_job(job_from_args(args))
    if str(args.output) == "-":
        write_data(json.dumps(plan_to_json(plan), indent=2) + "\n")
        return int(ExitCode.CLOSED_PIPE if cut_short() else ExitCode.OK)
    try:
        write_plan(plan, args.output)
    except OSError as error:
        raise CliError(
            f"cannot write {args.output}: {error.strerror or error}", io_exit_code(error)
        ) from None
    print(f"upsertmat {COMPILE}: wrote {args.output} ({len(plan.nodes)} operators)", file=sys.stderr)
    return int(ExitCode.OK)


def run_explain(args: argparse.Namespace) -> int:
    """``explain-plan``: validate and describe a plan."""
    plan, job = load_plan(args.plan)
    write_data(explain(plan, job) + "\n")
    return int(ExitCode.CLOSED_PIPE if cut_short() else ExitCode.OK)


def run_execute(args: argparse.Namespace) -> int:
    """``execute-plan``: run a plan (the command line's overrides and layers on top)."""
    plan = read_or_fail(args.plan)
    try:
        job = job_of_plan(plan, args.plan.resolve().parent, f"plan {args.plan}", cli_layers(args))
        job = with_overrides(
            job,
            sink_url=args.sink,
            table=args.table,
            checkpoint=args.checkpoint,
            source_path=args.source,
            materialize=None,
        )
    except (PlanError, ConfigError) as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    return execute(job, options_of(args), f"upsertmat {EXECUTE}")


def read_or_fail(path: Path) -> Plan:
    """The validated plan at ``path``; CliError (usage) if it is not one."""
    try:
        return read_plan(path)
    except PlanError as error:
        raise CliError(str(error), ExitCode.USAGE) from None


def add_compile_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``compile-plan``."""
    parser = subparsers.add_parser(
        COMPILE,
        help="compile a job file into a JSON plan with per-operator state TTL",
        description="Resolve a job file and write its operators as a JSON plan; edit a state entry's "
        "ttl, then run it with execute-plan.",
        epilog=f"example: upsertmat compile-plan examples/jobs/users-levels.yaml -o plan.json\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("job", type=Path, metavar="JOB", help="the job file (YAML)")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, metavar="PLAN", help="plan file ('-': stdout)"
    )
    add_job_arguments(parser)
    add_config_arguments(parser)
    parser.set_defaults(run=run_compile)


def add_explain_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``explain-plan``."""
    parser = subparsers.add_parser(
        EXPLAIN,
        help="validate a JSON plan and print its operators, keys, strategy and TTLs",
        description="Validate a compiled plan and print its operators, keys, strategy and state TTLs.",
        epilog=f"example: upsertmat explain-plan plan.json\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("plan", type=Path, metavar="PLAN", help="the plan file (JSON)")
    parser.set_defaults(run=run_explain)


def add_execute_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``execute-plan``."""
    parser = subparsers.add_parser(
        EXECUTE,
        help="run a JSON plan on the PySpark pipeline",
        description="Run a compiled plan: its TTLs per operator, the command line's layers on top.",
    )
    parser.add_argument("plan", type=Path, metavar="PLAN", help="the plan file (JSON)")
    group = parser.add_argument_group("overrides")
    group.add_argument(
        "--sink",
        metavar="URL",
        help="sink database: a SQLite file, sqlite:///relative.db, sqlite:////absolute.db, postgresql://…",
    )
    group.add_argument("--table", metavar="NAME", help="sink table")
    group.add_argument("--checkpoint", metavar="DIR", type=Path, help="Spark checkpoint directory")
    group.add_argument("--source", metavar="PATH", type=Path, help="the changelog files")
    add_run_arguments(parser)
    add_config_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run_execute)
