"""``upsertmat replay``: run a JSON Lines changelog through a materializer (docs/cli.md).

The command's parser and the checks of its flags; the run itself is the domain package
:mod:`upsertmat.replay` (input, processing, output, commit points), over the persistence
session :class:`~upsertmat.impls.persistence.session.StateSession` with ``--state-dir``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from upsertmat.commands.options import (
    add_config_arguments,
    add_max_int_digits,
    apply_max_int_digits,
    create_materializer,
    non_negative_int,
    parse_columns,
    positive_int,
    settings_from_args,
)
from upsertmat.errors import CliError
from upsertmat.impls import ConfigError
from upsertmat.impls.config import CHECKPOINT_INTERVAL
from upsertmat.impls.persistence.statedir import DEAD_LETTER_NAME
from upsertmat.impls.settings import DEFAULT_CHECKPOINT_INTERVAL
from upsertmat.replay.jsonl import RowShape
from upsertmat.replay.run import DEFAULT_DEAD_LETTER, ReplayOptions, replay
from upsertmat.spec import Keys, parse_equalizer

NAME = "replay"

EPILOG = """\
input, one JSON object per line (blank lines are skipped but counted):
  {"op": "+I", "row": [1, 10, "a1"], "ts": 17}    a change: op +I, -U, +U or -D; ts optional
  {"time": 1002}                                  a clock advance (ms)
output, one line per emitted change (in = 0-based index of the input line that caused it):
  {"in": 0, "op": "+I", "row": [1, 10, "a1"]}

line numbers in messages count from 1 and include blank lines.
exit codes: 0 ok, 1 bad input line (--on-error fail), 2 usage or configuration error,
  3 state directory locked/mismatched/damaged, 4 I/O error (a full disk, a device error),
  70 internal error, 130/143 interrupted by SIGINT/SIGTERM, 141 stdout's reader went away.

examples:
  upsertmat replay --pk 0 --strategy legacy --backend heap examples/out-of-order.jsonl
  upsertmat replay --pk 0 --upsert-key 1 examples/out-of-order.jsonl -o out.jsonl
  upsertmat replay --pk 0 --state-dir st part1.jsonl && upsertmat replay --pk 0 --state-dir st part2.jsonl
  producer | upsertmat replay --pk 0,2 --on-error skip --dead-letter bad.jsonl - | consumer
  upsertmat replay --pk 0 --config job.yaml --set table.exec.state.ttl=0 in.jsonl
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``replay`` with the top-level parser."""
    parser = subparsers.add_parser(
        NAME,
        help="replay a JSON Lines changelog through a materializer",
        description="Replay a JSON Lines changelog (+I -U +U -D) through a sink upsert materializer\n"
        "keyed by the sink primary key, and write the emitted upsert changes as JSON Lines.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "input", nargs="?", default="-", metavar="INPUT", help="input file; - = stdin (default)"
    )
    parser.add_argument(
        "-o", "--output", default="-", metavar="FILE", help="output file; - = stdout (default)"
    )
    keys = parser.add_argument_group("keys")
    keys.add_argument(
        "--pk",
        required=True,
        type=parse_columns,
        metavar="COLS",
        help="sink primary key columns, e.g. 0 or 0,2",
    )
    keys.add_argument(
        "--upsert-key",
        default=(),
        type=parse_columns,
        metavar="COLS",
        help="upsert key columns (default: none)",
    )
    keys.add_argument(
        "--equalizer",
        default="canonical",
        metavar="NAME",
        help="how rows are matched: canonical (default), case-insensitive, ignore-columns:I[,J] "
        "(positions within the compared values); kept in --state-dir",
    )
    keys.add_argument(
        "--arity",
        type=positive_int,
        metavar="N",
        help="columns every row must have (default: fixed by the first change; kept in --state-dir)",
    )
    errors = parser.add_argument_group("bad input")
    errors.add_argument(
        "--on-error",
        choices=("fail", "skip"),
        default="fail",
        help="fail: stop at a bad line (exit 1); skip: write it to the dead-letter file and go on",
    )
    errors.add_argument(
        "--dead-letter",
        type=Path,
        metavar="FILE",
        help=f"where --on-error skip appends bad lines (default: DIR/{DEAD_LETTER_NAME} "
        f"with --state-dir, else ./{DEFAULT_DEAD_LETTER})",
    )
    parser.add_argument(
        "--state-dir", type=Path, metavar="DIR", help="keep state and the line count in DIR across runs"
    )
    parser.add_argument(
        "--checkpoint-every",
        type=positive_int,
        metavar="N",
        help="with --state-dir: commit state, position and output every N lines (shortcut for "
        f"{CHECKPOINT_INTERVAL}; default {DEFAULT_CHECKPOINT_INTERVAL} on rocksdb/lmdb; heap: only when "
        "the run stops, as a checkpoint is a full snapshot). A killed run resumes from the last commit",
    )
    parser.add_argument(
        "--stream-line",
        type=non_negative_int,
        metavar="N",
        help="with --state-dir: the stream index (in) of this input's first line; lines the state "
        "has applied already are skipped. Needed for stdin after the first run (docs/operations.md)",
    )
    add_max_int_digits(parser)
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress line on stderr (default: only when stderr is a terminal)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no warnings (retractions that match nothing)"
    )
    parser.add_argument(
        "--misses",
        type=Path,
        metavar="FILE",
        help="write why each retraction matched no stored row, one JSON object per line (the closest "
        "stored rows of its key and the columns that differ; docs/cli.md). The summary of them ends "
        "the run on stderr either way",
    )
    add_config_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Execute ``upsertmat replay`` for parsed arguments; return the exit code."""
    try:
        settings = settings_from_args(args)
        keys = Keys(pk=args.pk, upsert_key=args.upsert_key, equalizer=parse_equalizer(args.equalizer))
        RowShape(keys, args.arity)
    except (ConfigError, ValueError) as error:
        raise CliError(str(error)) from None
    if args.dead_letter is not None and args.on_error != "skip":
        raise CliError("--dead-letter is only used with --on-error skip")
    if args.dead_letter is not None and not Path(args.dead_letter).parent.is_dir():
        raise CliError(
            f"--dead-letter {args.dead_letter}: the directory {Path(args.dead_letter).parent} does not exist"
        )
    if args.state_dir is None:
        for flag, value in (
            ("--checkpoint-every", args.checkpoint_every),
            ("--stream-line", args.stream_line),
        ):
            if value is not None:
                raise CliError(f"{flag} needs --state-dir (without it nothing is committed)")
    apply_max_int_digits(args)
    options = ReplayOptions(
        input=args.input,
        output=args.output,
        keys=keys,
        settings=settings,
        arity=args.arity,
        fail=args.on_error == "fail",
        dead_letter=None if args.dead_letter is None else Path(args.dead_letter),
        state_dir=None if args.state_dir is None else Path(args.state_dir),
        checkpoint_every=args.checkpoint_every,
        stream_line=args.stream_line,
        progress=args.progress,
        quiet=args.quiet,
        misses=args.misses,
    )
    return replay(options, create_materializer)
