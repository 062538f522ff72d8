"""``upsertmat demo``: the classic out-of-order case on generated data, without and with the materializer.

No arguments needed: the data, the checkpoints and the SQLite database go to a temporary
directory (``--dir`` keeps them). Prints the expected table and both sink tables side by side
and the disagreement counts. Exit 0 when the materialized table agrees with the expected one,
70 (a bug) when it does not.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from upsertmat.commands.job_options import cli_layers
from upsertmat.commands.options import add_config_arguments, positive_int, require_module
from upsertmat.demo.report import absent_keys, row_count_note, side_by_side, summary
from upsertmat.demo.runner import DemoOutcome, run_demo_in
from upsertmat.demo.tables import disagreements
from upsertmat.demo.workload import DemoShape
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls.config import ConfigError
from upsertmat.interrupt import Interrupted, StopSignals, interrupted
from upsertmat.jobs.execute import BOUNDARY_NOTICE
from upsertmat.jobs.loader import config_strings, resolve_settings, settings_layers
from upsertmat.jobs.runner import announce_spark_log, batch_line, spark_log_note
from upsertmat.replay.failures import io_exit_code

if TYPE_CHECKING:
    from upsertmat.spark.config import BatchProgress

NAME = "demo"
EPILOG = """\
the data: SELECT u.id, u.level, l.badge FROM users u JOIN levels l ON u.level = l.level,
  run by --channels parallel tasks partitioned by level, into a sink keyed by id. A user
  changing level yields -U(old level) and +U(new level) on two channels: they can arrive in
  either order, and a sink without the materializer then deletes the user.

Ctrl-C / SIGTERM: while Spark starts, the demo ends at once; then at a micro-batch boundary
  (again: at once). Either way one line.

exit codes: 0 the materialized table agrees with the expected one, 2 usage or configuration
  error (before Spark starts) or Spark did not start, 4 I/O error, 70 the materialized table
  disagrees (a bug) or an internal error, 130/143 interrupted by SIGINT/SIGTERM.

examples:
  upsertmat demo
  upsertmat demo --strategy MAP --users 200 --events 2000 --dir demo-out
"""


def _progress(quiet: bool) -> Callable[[str], Callable[[BatchProgress], None] | None]:
    def for_run(label: str) -> Callable[[BatchProgress], None] | None:
        if quiet:
            return None

        def report(batch: BatchProgress) -> None:
            print(batch_line(f"upsertmat demo ({label})", batch), file=sys.stderr, flush=True)

        return report

    return for_run


def render(outcome: DemoOutcome, shape: DemoShape, directory: Path | None = None) -> str:
    """The demo's stdout: the data, the side-by-side tables, the counts and timings.

    ``directory``: where the data was kept (``--dir``); None for a temporary directory, whose
    paths are not shown (they are gone when the command exits).
    """
    data = outcome.data
    moves = sum(1 for a, b in zip(data.arrival, data.arrival[1:], strict=False) if a.id == b.id)
    raw, mat = outcome.raw, outcome.materialized
    absent = absent_keys(range(1, shape.users + 1), outcome.expected, raw.table, mat.table)
    note = row_count_note(shape.users, outcome.expected, absent)
    where = (
        f"  kept in {directory}: source/, demo.db (tables raw, materialized), checkpoint-*/"
        if directory is not None
        else "  data, checkpoints and database in a temporary directory, deleted on exit "
        "(--dir DIR keeps them)"
    )
    return "\n".join(
        [
            f"upsertmat demo: {shape.users} users on {shape.levels} levels, join output shuffled by level "
            f"over {shape.channels} parallel channels",
            f"  {len(data.logical)} changes (logical order) -> {len(data.arrival)} arrivals "
            f"({moves} back-to-back changes of one key); sink primary key: id",
            f"  changes reaching the sink: {raw.result.changes} without the materializer (every arrival), "
            f"{mat.result.changes} with it (it emits a change only when a key's visible row changes)",
            f"  strategy {mat.job.settings.strategy.value} on Spark's state store",
            where,
            "",
            side_by_side(outcome.expected, raw.table, mat.table),
            *([note] if note else []),
            "",
            summary(outcome.expected, raw.table, mat.table),
            "",
            f"time: Spark session {outcome.session_seconds:.1f} s, without materializer {raw.seconds:.1f} s, "
            f"with materializer {mat.seconds:.1f} s",
        ]
    )


def usable_dir(path: Path) -> Path:
    """``--dir`` resolved and created if missing, before Spark starts: CliError (2 for a path
    that cannot be a directory: a file, no permission; 4 for a device error or a full disk)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CliError(f"--dir {path} is not a directory", ExitCode.USAGE) from None
    except OSError as error:
        raise CliError(
            f"--dir {path} cannot be created: {error.strerror or error}", io_exit_code(error)
        ) from None
    return path.resolve()


def run(args: argparse.Namespace) -> int:
    """``upsertmat demo``."""
    try:
        settings = resolve_settings(settings_layers({}, "demo", cli_layers(args)))
    except ConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    try:
        shape = DemoShape(args.users, args.levels, args.channels, args.events, seed=args.seed)
    except ValueError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    config = config_strings(settings)
    require_module("pyspark")
    kept = None if args.dir is None else usable_dir(args.dir)
    if not args.quiet:  # the JVM and the first stateful query take 10-20 s: say so at once
        print("upsertmat demo: starting Spark (local[2]; about 15 s) ...", file=sys.stderr, flush=True)
    # Until Spark runs, a signal ends the demo at once; then at a micro-batch boundary.
    signals = StopSignals("upsertmat demo", notice=BOUNDARY_NOTICE, force=True)
    try:
        with signals:
            outcome = run_demo_in(kept, settings, config, shape, _progress(args.quiet), signals)
    except Interrupted as stop:
        return interrupted("upsertmat demo", stop, spark_log_note())
    if outcome is None or signals():
        signals.say(f"interrupted ({signals.name}){spark_log_note()}")
        return signals.exit_code
    print(render(outcome, shape, kept))
    announce_spark_log(args.quiet, "upsertmat demo")
    if disagreements(outcome.materialized.table, outcome.expected):
        print(
            "upsertmat demo: the materialized table disagrees with the expected one (a bug)", file=sys.stderr
        )
        return int(ExitCode.INTERNAL)
    return int(ExitCode.OK)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``demo``."""
    parser = subparsers.add_parser(
        NAME,
        help="show a sink without and with the materializer on shuffled join output (needs Spark)",
        description="Generate a join's output shuffled by a non-key column, run the pipeline without "
        "and with the materializer into SQLite, and compare both tables with the expected one.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    defaults = DemoShape()
    data = parser.add_argument_group("data")
    data.add_argument("--users", type=positive_int, default=defaults.users, help=f"default {defaults.users}")
    data.add_argument(
        "--levels", type=positive_int, default=defaults.levels, help=f"default {defaults.levels}"
    )
    data.add_argument(
        "--channels",
        type=positive_int,
        default=defaults.channels,
        help=f"parallel join tasks (default {defaults.channels})",
    )
    data.add_argument(
        "--events",
        type=positive_int,
        default=defaults.events,
        help=f"user events (default {defaults.events})",
    )
    data.add_argument("--seed", type=int, default=defaults.seed, help=f"default {defaults.seed}")
    parser.add_argument(
        "--dir", type=Path, help="keep the data, checkpoints and database here (default: a temp dir)"
    )
    add_config_arguments(parser, "")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.set_defaults(run=run)
