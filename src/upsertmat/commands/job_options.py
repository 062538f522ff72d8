"""The options of the commands that run a job on the pipeline: ``run``, ``execute-plan``,
``compile-plan`` (and the trigger interval ``gateway`` shares).

:func:`add_job_arguments` declares the overrides of a job file's fields, :func:`job_from_args`
resolves a job file with every command-line layer and override, :func:`add_run_arguments` the
continuous runs and result modes, :func:`options_of` turns them into the embedded runner's
:class:`~upsertmat.jobs.execute.RunOptions`. Parsing only: running is :mod:`upsertmat.jobs`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from upsertmat.client.modes import RESULT_MODES, TABLEAU_FORMATS
from upsertmat.commands.options import config_layers, positive_int, require_module
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError, parse_duration_ms
from upsertmat.jobs.execute import RunOptions
from upsertmat.jobs.loader import Layer, check_source, load_job, with_overrides
from upsertmat.jobs.model import JobSpec

JOB_LAYER = "the job file's config"
STOPPING = """\
Ctrl-C / SIGTERM: while Spark starts, the run ends at once; once the query runs, at a
  micro-batch boundary (again: at once). Either way one line; every committed batch is kept.

exit codes:
  0        the input is processed (--follow: --until-idle reached)
  1        bad input: a source row that cannot be a change (on-error: fail)
  2        usage or configuration error (before Spark starts), or Spark did not start
  4        I/O error: the sink cannot be written, or Spark's log cannot
  70       internal error (a bug; please report it)
  75       Spark's Python worker did not connect back in time (a loaded machine; --follow
           retries from the checkpoint 3 times first); run the same command again to continue
  130/143  interrupted by SIGINT/SIGTERM; run the same command again to continue
  141      stdout's reader went away (--result-mode tableau | head)
"""
"""How ``run`` and ``execute-plan`` stop, and their exit codes (the end of their --help)."""


def add_job_arguments(parser: argparse.ArgumentParser, materialize: bool = True) -> None:
    """The options that override a job's fields (``run``, ``compile-plan``, ``execute-plan``;
    ``materialize``: offer ``--no-materialize`` too, which a compiled plan fixes)."""
    group = parser.add_argument_group("job overrides")
    group.add_argument(
        "--sink",
        metavar="URL",
        help="the sink, by kind: sqlite (a SQLite file, sqlite:///relative.db, sqlite:////absolute.db), "
        "postgresql (postgresql://…), delta (delta:///…), iceberg (iceberg:///… or iceberg+catalog:NAME), "
        "paimon (paimon:///…); delta, iceberg and paimon need the lakehouse extra",
    )
    group.add_argument("--table", metavar="NAME", help="sink table")
    group.add_argument("--checkpoint", metavar="DIR", type=Path, help="Spark checkpoint directory")
    group.add_argument("--source", metavar="PATH", type=Path, help="the changelog files")
    group.add_argument(
        "--on-error",
        choices=("fail", "skip"),
        help="a source row that cannot be a change: fail (the job's default: stop before the batch "
        "commits, exit 1) or skip (write it to the dead-letter directory and go on)",
    )
    if materialize:
        group.add_argument(
            "--no-materialize",
            dest="materialize",
            action="store_false",
            default=None,
            help="write the raw changelog to the sink (no materializer: shows the wrong result)",
        )


def overridden(job: JobSpec, args: argparse.Namespace) -> JobSpec:
    """``job`` with the overrides :func:`add_job_arguments` declared (JobError if one is bad)."""
    return with_overrides(
        job,
        sink_url=args.sink,
        table=args.table,
        checkpoint=args.checkpoint,
        source_path=args.source,
        materialize=getattr(args, "materialize", None),
        on_error=getattr(args, "on_error", None),
    )


def runnable(job: JobSpec, args: argparse.Namespace, where: str) -> JobSpec:
    """``job`` once PySpark can be imported (ModuleNotFoundError otherwise, which the command
    line turns into the extra to install) and its source directory is there and readable
    (CliError, usage, otherwise): what the commands that run a job check before Spark starts.
    ``where`` names the job file or plan; ``--source`` is named when it set the path."""
    require_module("pyspark")
    try:
        overridden = getattr(args, "source", None) is not None
        check_source(job.source.path, "--source" if overridden else f"{where}: source.path")
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    return job


def cli_layers(args: argparse.Namespace) -> list[Layer]:
    """The command line's configuration layers (without the built-in defaults)."""
    try:
        return config_layers(args)[1:]
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None


def job_from_args(args: argparse.Namespace) -> JobSpec:
    """The job file of ``args.job`` resolved with every command-line layer and override."""
    try:
        return overridden(load_job(args.job, cli_layers(args)), args)
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None


def interval(text: str) -> str:
    """An argparse type: a duration (``500 ms``, ``2 s``, ``1000``) as Spark's trigger interval."""
    try:
        milliseconds = parse_duration_ms(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if milliseconds <= 0:
        raise argparse.ArgumentTypeError(f"the interval must be positive, got {text!r}")
    return f"{milliseconds} milliseconds"


def options_of(args: argparse.Namespace) -> RunOptions:
    """The :class:`RunOptions` of a parsed ``run``/``execute-plan`` command line."""
    follow = args.trigger_interval if (args.follow or args.until_idle is not None) else None
    views = None
    if args.result_mode is not None:
        from upsertmat.client.render import TerminalViews  # rich: imported only for a result mode

        views = TerminalViews()
    return RunOptions(
        quiet=args.quiet,
        follow=follow,
        until_idle=args.until_idle,
        result_mode=args.result_mode,
        format=args.format,
        max_table_rows=args.max_table_rows,
        max_changelog_rows=args.max_changelog_rows,
        session_dir=args.session_dir,
        views=views,
    )


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Continuous runs and result modes (``run`` and ``execute-plan``)."""
    group = parser.add_argument_group("continuous runs and results")
    group.add_argument(
        "--follow",
        action="store_true",
        help="keep running, taking new source files as they appear, until Ctrl-C / SIGTERM "
        "(exit 130 / 143; stops at a micro-batch boundary)",
    )
    group.add_argument(
        "--until-idle",
        type=float,
        metavar="SECONDS",
        help="with --follow implied: stop (exit 0) once no micro-batch has run for SECONDS (while a "
        "batch runs, that is not idle time)",
    )
    group.add_argument(
        "--trigger-interval",
        type=interval,
        default="1000 milliseconds",
        metavar="DURATION",
        help="how often a continuous run looks for new files (default '1 s')",
    )
    group.add_argument(
        "--result-mode",
        choices=RESULT_MODES,
        help="table: the sink table redrawn after each committed batch; changelog: its +I/-U/+U/-D "
        "changes; tableau: the changes as plain lines on stdout (for scripts)",
    )
    group.add_argument(
        "--format", choices=TABLEAU_FORMATS, default="text", help="tableau's lines: text or jsonl"
    )
    group.add_argument(
        "--max-table-rows", type=positive_int, default=1000, metavar="N", help="rows held in table mode"
    )
    group.add_argument(
        "--max-changelog-rows",
        type=positive_int,
        default=1000,
        metavar="N",
        help="changes held in changelog mode (the newest that fit are shown)",
    )
    group.add_argument(
        "--session-dir",
        type=Path,
        metavar="DIR",
        help="for a job with sink: {internal: true}: keep its result and checkpoint here (default: a "
        "temporary directory removed on exit)",
    )
