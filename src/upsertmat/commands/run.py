"""``upsertmat run JOB``: run a job file on the PySpark pipeline, a progress line per micro-batch.

Configuration layers, lowest first: built-in defaults < the pipeline's defaults < the job file's
``config`` < ``--config FILE`` < ``--set KEY=VALUE`` < ``--strategy/--backend/--ttl`` (the same
keys as ``upsertmat replay``; what the pipeline cannot run is refused before Spark starts).
``--sink``, ``--table``, ``--checkpoint``, ``--source`` and ``--no-materialize`` override the job
file's fields. Progress goes to stderr, the summary to stdout. The run is
:func:`upsertmat.jobs.execute.execute`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from upsertmat.commands.job_options import (
    JOB_LAYER,
    STOPPING,
    add_job_arguments,
    add_run_arguments,
    job_from_args,
    options_of,
    runnable,
)
from upsertmat.commands.options import add_config_arguments
from upsertmat.jobs.execute import execute

NAME = "run"
EPILOG = f"""\
job file format and examples: docs/plans.md, examples/jobs/.

paths: the source (a directory, which must exist) is relative to the job file; the sink
  file and the checkpoint to the working directory. A rerun on the same checkpoint continues
  exactly once.

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


def run(args: argparse.Namespace) -> int:
    """``upsertmat run``."""
    job = runnable(job_from_args(args), args, f"job file {args.job}")
    return execute(job, options_of(args), f"upsertmat {NAME}")


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
