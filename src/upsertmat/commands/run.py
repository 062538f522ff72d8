"""``upsertmat run JOB``: run a job file on the PySpark pipeline, a progress line per micro-batch.

Configuration layers, lowest first: built-in defaults < the pipeline's defaults < the job file's
``config`` < ``--config FILE`` < ``--set KEY=VALUE`` < ``--strategy/--backend/--ttl`` (the same
keys as ``upsertmat replay``; what the pipeline cannot run is refused before Spark starts).
``--sink``, ``--table``, ``--checkpoint``, ``--source`` and ``--no-materialize`` override the job
file's fields. Progress goes to stderr, the summary to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from upsertmat.client.modes import RESULT_MODES, TABLEAU_FORMATS
from upsertmat.commands.options import add_config_arguments, config_layers, positive_int
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError, parse_duration_ms
from upsertmat.interrupt import Interrupted, StopSignals, interrupted
from upsertmat.jobs.embedded import ResultFollower, embedded_session
from upsertmat.jobs.loader import Layer, load_job, with_overrides
from upsertmat.jobs.model import JobSpec
from upsertmat.jobs.runner import (
    announce_spark_log,
    committed_batches,
    printer,
    require_pyspark,
    run_job,
    source_files,
    spark_log_note,
    start_spark,
)

if TYPE_CHECKING:
    from upsertmat.spark.config import BatchProgress, PipelineResult

NAME = "run"
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
  130/143  interrupted by SIGINT/SIGTERM; run the same command again to continue
  141      stdout's reader went away (--result-mode tableau | head)
"""
"""How ``run`` and ``execute-plan`` stop, and their exit codes (the end of their --help)."""
EPILOG = f"""\
job file format and examples: docs/plans.md, examples/jobs/.

paths: the source is relative to the job file; the sink file and the checkpoint to the
  working directory. A rerun on the same checkpoint continues exactly once.

bad input: a source row that cannot be a change (malformed line, unknown op, wrong type,
  missing key or order column) stops the job before its batch commits (exit 1, the file and
  line named); fix the file in place and run again, or --on-error skip (dead-letter directory).

{STOPPING}
examples:
  upsertmat run examples/jobs/users-levels.yaml
  upsertmat run examples/jobs/users-levels.yaml --follow --result-mode table
  upsertmat run job.yaml --until-idle 5 --result-mode tableau --format jsonl > changes.jsonl
  upsertmat run job.yaml --strategy MAP --ttl '1 h' --sink postgresql://me@localhost:5432/db
"""


def add_job_arguments(parser: argparse.ArgumentParser, materialize: bool = True) -> None:
    """The options that override a job's fields (``run``, ``compile-plan``, ``execute-plan``;
    ``materialize``: offer ``--no-materialize`` too, which a compiled plan fixes)."""
    group = parser.add_argument_group("job overrides")
    group.add_argument(
        "--sink",
        metavar="URL",
        help="sink database: a SQLite file, sqlite:///relative.db, sqlite:////absolute.db, postgresql://…",
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


@dataclass(frozen=True)
class RunOptions:
    """How an embedded run goes: continuous or not, which result mode, and its bounds."""

    quiet: bool = False
    follow: str | None = None
    until_idle: float | None = None
    result_mode: str | None = None
    format: str = "text"
    max_table_rows: int = 1000
    max_changelog_rows: int = 1000
    session_dir: Path | None = None


def options_of(args: argparse.Namespace) -> RunOptions:
    """The :class:`RunOptions` of a parsed ``run``/``execute-plan`` command line."""
    follow = args.trigger_interval if (args.follow or args.until_idle is not None) else None
    return RunOptions(
        quiet=args.quiet,
        follow=follow,
        until_idle=args.until_idle,
        result_mode=args.result_mode,
        format=args.format,
        max_table_rows=args.max_table_rows,
        max_changelog_rows=args.max_changelog_rows,
        session_dir=args.session_dir,
    )


BOUNDARY_NOTICE = "stopping at the next micro-batch boundary (press Ctrl-C again to exit at once)"


def execute(job: JobSpec, options: RunOptions, prefix: str) -> int:
    """Run ``job`` in this process (the embedded client): progress on stderr unless quiet, the
    result mode's output, the summary on stderr for a result mode (stdout otherwise).

    Ctrl-C / SIGTERM while Spark starts end the run at once; once the query runs, at a
    micro-batch boundary (a second signal: at once). Either way one ``interrupted`` line, exit
    130 / 143. ``until_idle`` stops with exit 0 once no batch has run for that many seconds.
    """
    require_pyspark()
    signals = StopSignals(prefix, busy=True, notice=BOUNDARY_NOTICE, force=True)
    try:
        with signals, embedded_session(job, options.session_dir) as running:
            return _execute(running, options, prefix, signals)
    except Interrupted as stop:  # while Spark was starting: no query ran
        return interrupted(
            prefix, stop, f" while Spark was starting: this run wrote nothing{spark_log_note()}"
        )


def _execute(job: JobSpec, options: RunOptions, prefix: str, signals: StopSignals) -> int:
    """:func:`execute` inside its signal frame, which starts ``busy``: signals are looked at once
    the set-up is done; the frame is not busy while Spark starts, busy again while the query runs."""
    from upsertmat.spark.badinput import BadInput
    from upsertmat.spark.config import PipelineConfigError
    from upsertmat.spark.sink import SinkError

    resumed = committed_batches(job.checkpoint)
    follower = None
    try:
        follower = _follower(job, options, prefix)
        report = (
            None
            if options.quiet or options.result_mode in ("table", "changelog")
            else printer(prefix, sys.stderr)
        )

        def progress(batch: BatchProgress) -> None:
            if report is not None:
                report(batch)
            if follower is not None:
                follower.on_batch(batch)

        with _page_keys(follower):
            if follower is not None:
                follower.show()  # what earlier runs committed, before the first new batch
            if not options.quiet:
                print(f"{prefix}: starting Spark ({job.spark.master}) ...", file=sys.stderr, flush=True)
            signals.busy = False
            signals.check()
            start_spark(job)  # a signal now ends the run at once (Interrupted)
            signals.busy = True
            result = run_job(
                job,
                progress,
                stop=lambda: signals() or (follower is not None and follower.closed),
                follow=options.follow,
                changelog=options.result_mode in ("changelog", "tableau"),
                until_idle=options.until_idle,
            )
    except PipelineConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    except BadInput as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from None
    except SinkError as error:
        raise CliError(str(error), ExitCode.IO) from None
    finally:
        signals.busy = True  # the clean-up runs to its end
        if follower is not None and not follower.closed:
            follower.renderer.close()
    if follower is not None and follower.closed:
        return _closed_pipe()
    if signals():
        done = f" after {len(result.batches)} micro-batches ({result.changes:,} changes)"
        signals.say(
            f"interrupted ({signals.name}){done}; every committed batch is kept: "
            f"run the same command again to continue{spark_log_note()}"
        )
        return signals.exit_code
    _summary(job, result, resumed, options, prefix)
    announce_spark_log(options.quiet, prefix)
    return int(ExitCode.OK)


def _follower(job: JobSpec, options: RunOptions, prefix: str) -> ResultFollower | None:
    if options.result_mode is None:
        return None
    from upsertmat.client.render import make_renderer  # rich: imported only for a result mode

    title = f"{prefix}: job {job.name!r}, table {job.sink.table}"
    renderer = make_renderer(
        options.result_mode,
        title,
        max_rows=options.max_table_rows,
        keep=options.max_changelog_rows,
        format=options.format,
    )
    return ResultFollower(
        job.sink.url, job.sink.table, job.primary_key, options.result_mode, renderer, options.max_table_rows
    )


def _page_keys(follower: ResultFollower | None) -> contextlib.AbstractContextManager[object]:
    if follower is None or follower.mode != "table":
        return contextlib.nullcontext()
    from upsertmat.client.render import PageKeys, TableScreen

    renderer = follower.renderer
    if isinstance(renderer, TableScreen):
        return PageKeys(renderer.turn)
    return contextlib.nullcontext()


def _closed_pipe() -> int:
    """Stdout's reader went away: quiet, as Unix tools are, exit 141 (128 + SIGPIPE). Every
    committed batch is kept; a rerun continues after it."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # the interpreter's final flush must not fail again
    os.close(devnull)
    return 128 + signal.SIGPIPE


def _summary(job: JobSpec, result: PipelineResult, resumed: int, options: RunOptions, prefix: str) -> None:
    rate = result.input_rows / result.seconds if result.seconds > 0 else 0.0
    where = "the internal result" if job.sink.internal else f"{job.sink.url} table {job.sink.table}"
    text = (
        f"{prefix}: job {job.name!r}: {result.input_rows:,} changes read, {result.changes:,} written to "
        f"{where} in {len(result.batches)} micro-batches, "
        f"{result.seconds:.1f} s ({rate:,.0f} changes/s); "
        f"materializer {'on, ' + job.settings.strategy.value if job.materialize else 'off'}"
    )
    if result.input_rows == 0 and not result.batches and resumed and source_files(job.source.path):
        text += (
            f"; the checkpoint {job.checkpoint} has already processed every file in {job.source.path} "
            "(new files are picked up; a new --checkpoint and sink start over)"
        )
    # A result mode owns stdout (tableau: nothing but changes), so the summary goes to stderr.
    stream = sys.stderr if options.result_mode is not None else sys.stdout
    if not (options.quiet and stream is sys.stderr):
        print(text, file=stream, flush=True)
        for line in result.misses.lines(job.source.column_names):
            print(f"{prefix}: {line}", file=stream, flush=True)
        if result.bad_rows:
            directory = job.source.dead_letter or job.checkpoint / "dead-letter"
            print(
                f"{prefix}: skipped {result.bad_rows:,} bad source row(s); they are in {directory}",
                file=stream,
                flush=True,
            )
        if result.misses.misses:
            where = "the internal result's database" if job.sink.internal else job.sink.url
            print(
                f"{prefix}: each miss is explained in table _upsertmat_misses of {where}",
                file=stream,
                flush=True,
            )


def run(args: argparse.Namespace) -> int:
    """``upsertmat run``."""
    return execute(job_from_args(args), options_of(args), f"upsertmat {NAME}")


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


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``run``."""
    parser = subparsers.add_parser(
        NAME,
        help="run a job file on the PySpark pipeline (source -> materializer -> upsert sink)",
        description="Run a job file: changelog files -> the materializer on Spark -> an upsert sink.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("job", type=Path, metavar="JOB", help="the job file (YAML)")
    add_job_arguments(parser)
    add_run_arguments(parser)
    add_config_arguments(parser, JOB_LAYER)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run)
