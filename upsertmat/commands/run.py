"""``upsertmat run JOB``: run a job file on the PySpark pipeline, a progress line per micro-batch.

Configuration layers, lowest first: built-in defaults < the job file's ``config`` < ``--config
FILE`` < ``--set KEY=VALUE`` < ``--strategy/--backend/--ttl`` (the same keys as ``upsertmat
replay``). ``--sink``, ``--table``, ``--checkpoint``, ``--source`` and ``--no-materialize``
override the job file's fields. Progress goes to stderr, the summary to stdout.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from upsertmat.commands.options import add_config_arguments, config_layers
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError
from upsertmat.jobs.loader import Layer, load_job, with_overrides
from upsertmat.jobs.model import JobSpec
from upsertmat.jobs.runner import announce_spark_log, printer, require_pyspark, run_job

NAME = "run"
EPILOG = """\
configuration layers, lowest first: built-in defaults < the job file's config <
  --config FILE < --set KEY=VALUE < --strategy/--backend/--ttl.
job file format and examples: docs/plans.md, examples/jobs/.

examples:
  upsertmat run examples/jobs/users-levels.yaml
  upsertmat run job.yaml --strategy MAP --ttl '1 h' --sink postgresql://me@localhost:5432/db
"""


def add_job_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that override a job file's fields."""
    group = parser.add_argument_group("job overrides")
    group.add_argument(
        "--sink", metavar="URL", help="sink database: SQLite path, sqlite:///…, postgresql://…"
    )
    group.add_argument("--table", metavar="NAME", help="sink table")
    group.add_argument("--checkpoint", metavar="DIR", type=Path, help="Spark checkpoint directory")
    group.add_argument("--source", metavar="PATH", type=Path, help="the changelog files")
    group.add_argument(
        "--no-materialize",
        dest="materialize",
        action="store_false",
        default=None,
        help="write the raw changelog to the sink (no materializer: shows the wrong result)",
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
        job = load_job(args.job, cli_layers(args))
        return with_overrides(
            job,
            sink_url=args.sink,
            table=args.table,
            checkpoint=args.checkpoint,
            source_path=args.source,
            materialize=args.materialize,
        )
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None


def execute(job: JobSpec, quiet: bool, prefix: str) -> int:
    """Run ``job`` with progress on stderr (unless quiet); print the summary on stdout."""
    require_pyspark()
    from upsertmat.spark.config import PipelineConfigError
    from upsertmat.spark.sink import SinkError

    try:
        result = run_job(job, None if quiet else printer(prefix, sys.stderr))
    except PipelineConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    except SinkError as error:
        raise CliError(str(error), ExitCode.IO) from None
    rate = result.input_rows / result.seconds if result.seconds > 0 else 0.0
    print(
        f"{prefix}: job {job.name!r}: {result.input_rows:,} changes read, {result.changes:,} written to "
        f"{job.sink.url} table {job.sink.table} in {len(result.batches)} micro-batches, "
        f"{result.seconds:.1f} s ({rate:,.0f} changes/s); "
        f"materializer {'on, ' + job.settings.strategy.value if job.materialize else 'off'}"
    )
    names = job.source.column_names
    for line in result.misses.lines(names):
        print(f"{prefix}: {line}")
    if result.misses.misses:
        print(f"{prefix}: each miss is explained in table _upsertmat_misses of {job.sink.url}")
    announce_spark_log(quiet, prefix)
    return int(ExitCode.OK)


def run(args: argparse.Namespace) -> int:
    """``upsertmat run``."""
    return execute(job_from_args(args), args.quiet, f"upsertmat {NAME}")


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
    add_config_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run)
