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

from upsertmat.commands.job_options import (
    JOB_LAYER,
    STOPPING,
    add_job_arguments,
    add_run_arguments,
    cli_layers,
    job_from_args,
    options_of,
    overridden,
    runnable,
)
from upsertmat.commands.options import add_config_arguments
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError
from upsertmat.jobs.execute import execute
from upsertmat.jobs.model import JobSpec
from upsertmat.plan.codec import plan_to_json, read_plan, write_plan
from upsertmat.plan.compiler import compile_job, job_of_plan
from upsertmat.plan.explain import explain
from upsertmat.plan.model import Plan, PlanError
from upsertmat.replay.failures import io_exit_code
from upsertmat.stdout import cut_short, write_data

COMPILE, EXPLAIN, EXECUTE = "compile-plan", "explain-plan", "execute-plan"
PLAN_LAYERS = "the plan's configuration < its materializer node's strategy and state TTL"
COMPILE_EPILOG = """\
example: upsertmat compile-plan examples/jobs/users-levels.yaml -o plan.json
exit codes: 0 written, 2 usage or configuration error (the job file, an option, a strategy the
  pipeline does not run), 4 I/O error (the plan or stdout cannot be written: a full disk, a
  device error), 70 internal error, 141 stdout's reader went away.
"""
EXECUTE_EPILOG = STOPPING
EXPLAIN_EPILOG = """\
example: upsertmat explain-plan plan.json
exit codes: 0 a valid plan (described on stdout), 2 not a valid plan (one line naming what is
  wrong), 4 I/O error (stdout cannot be written), 70 internal error, 141 stdout's reader went away.
"""


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
        job = overridden(job, args)
    except (PlanError, ConfigError) as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    job = runnable(job, args, f"plan {args.plan}")
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
        epilog=COMPILE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("job", type=Path, metavar="JOB", help="the job file (YAML)")
    parser.add_argument(
        "-o", "--output", type=Path, required=True, metavar="PLAN", help="plan file ('-': stdout)"
    )
    add_job_arguments(parser)
    add_config_arguments(parser, JOB_LAYER)
    parser.set_defaults(run=run_compile)


def add_explain_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``explain-plan``."""
    parser = subparsers.add_parser(
        EXPLAIN,
        help="validate a JSON plan and print its operators, keys, strategy and TTLs",
        description="Validate a compiled plan and print its operators, keys, strategy and state TTLs.",
        epilog=EXPLAIN_EPILOG,
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
        epilog=EXECUTE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("plan", type=Path, metavar="PLAN", help="the plan file (JSON)")
    add_job_arguments(parser, materialize=False)
    add_run_arguments(parser)
    add_config_arguments(parser, PLAN_LAYERS)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run_execute)
