"""``upsertmat check-keys``: whether a changelog keeps the guarantee the materializer relies on.

Reads the JSON Lines of ``upsertmat replay`` (clock lines are skipped) and reports, with line
numbers and examples, every RETRACT that differs from its ADD, comes before it or has none, and
every second live row of a declared upsert key (:mod:`upsertmat.keycheck`). The last line is a
verdict (``check-keys: OK: ...`` or ``check-keys: FAIL: ...``). Exit codes as in
:data:`EPILOG`: an input that cannot be opened (missing, no permission) is a usage error, as
for ``replay``; a device that fails while it is read, or stdout that cannot be written, is 4.
"""

from __future__ import annotations

import argparse

from upsertmat.commands.options import add_max_int_digits, apply_max_int_digits, parse_columns, positive_int
from upsertmat.errors import CliError, ExitCode
from upsertmat.keycheck import check_changelog, render_json, render_text
from upsertmat.spec import Keys
from upsertmat.stdout import cut_short, write_data

NAME = "check-keys"

EPILOG = """\
examples:
  upsertmat check-keys --pk 0 --upsert-key 1 changelog.jsonl
  producer | upsertmat check-keys --pk 0 --format json - | jq .counts
  upsertmat check-keys --pk 0 changelog.jsonl > report.txt || echo "the keys do not hold"

exit codes: 0 no violation, 1 a violation or a bad input line (named with its number),
  2 usage error (also an input that cannot be opened: missing, no permission), 4 I/O error
  (reading the input or writing stdout failed: a device error, a full disk), 70 internal error,
  141 stdout's reader went away.
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``upsertmat check-keys``."""
    parser = subparsers.add_parser(
        NAME,
        help="check that a changelog keeps the guarantee the materializer relies on",
        description="Read a JSON Lines changelog and report what breaks the guarantee the materializer "
        "relies on: a RETRACT whose values differ from its ADD's, a RETRACT before its ADD, a RETRACT "
        "of a row never added, and (with --upsert-key) a declared upsert key with two live rows. The "
        "last line is a verdict; exit 0 when the changelog is clean, 1 when not.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "input", nargs="?", default="-", metavar="INPUT", help="input file; - = stdin (default)"
    )
    parser.add_argument(
        "--pk",
        required=True,
        type=parse_columns,
        metavar="COLS",
        help="sink primary key columns, e.g. 0 or 0,2",
    )
    parser.add_argument(
        "--upsert-key",
        default=(),
        type=parse_columns,
        metavar="COLS",
        help="the upsert key the changelog should have (default: none; rows are then whole-row keys)",
    )
    parser.add_argument(
        "--examples", type=positive_int, default=5, metavar="N", help="examples shown per kind (default 5)"
    )
    parser.add_argument(
        "--format", choices=("text", "json"), default="text", help="text (default) or one JSON object"
    )
    add_max_int_digits(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Check the input; print the report; the exit code."""
    try:
        keys = Keys(pk=args.pk, upsert_key=args.upsert_key)
    except ValueError as error:
        raise CliError(str(error)) from None
    apply_max_int_digits(args)
    report = check_changelog(args.input, keys)
    render = render_json if args.format == "json" else render_text
    # A closed stdout (`check-keys ... | head`) raises BrokenPipeError: main exits 141, quietly.
    write_data(render(report, keys, args.examples))
    if cut_short():
        return int(ExitCode.CLOSED_PIPE)
    return int(ExitCode.OK if report.ok else ExitCode.BAD_INPUT)
