"""The ``upsertmat`` command line: a top-level parser and one module per subcommand.

A subcommand module exposes ``add_parser(subparsers)``, which registers its parser and sets
the default ``run`` to a function ``(argparse.Namespace) -> int`` (the exit code). Adding a
command is adding its module to :data:`SUBCOMMANDS`. Errors go to stderr as
``upsertmat COMMAND: MESSAGE`` with the exit codes of :class:`upsertmat.errors.ExitCode`;
data goes to stdout.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable, Sequence

from upsertmat import __version__
from upsertmat.commands import (
    bench,
    check_keys,
    conformance,
    conformance_matrix,
    demo,
    plan,
    replay,
    run,
    savepoint,
)
from upsertmat.errors import CliError, ExitCode, StateDirError, exit_code_of

SubcommandAdder = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]
SUBCOMMANDS: tuple[SubcommandAdder, ...] = (
    replay.add_parser,
    check_keys.add_parser,
    savepoint.add_parser,
    bench.add_parser,
    run.add_parser,
    demo.add_parser,
    plan.add_compile_parser,
    plan.add_explain_parser,
    plan.add_execute_parser,
    conformance.add_parser,
    conformance_matrix.add_parser,
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="upsertmat",
        description="Sink upsert materialization: the executable specification, its "
        "implementations and tools. Run 'upsertmat COMMAND --help' for a command's options.",
        epilog="exit codes: 0 ok, 1 bad input, 2 usage or configuration error, 3 state "
        "directory problem, 4 I/O error, 70 internal error, 130/143 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"upsertmat {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for add_parser in SUBCOMMANDS:
        add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a usage error (argparse printed it)
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else ExitCode.USAGE)
    if args.command is None:
        parser.print_help(sys.stderr)
        return ExitCode.USAGE
    try:
        return int(args.run(args))
    except CliError as error:
        print(f"upsertmat {args.command}: {error.message}", file=sys.stderr)
        return int(error.code)
    except StateDirError as error:
        print(f"upsertmat {args.command}: {error.message}", file=sys.stderr)
        return int(exit_code_of(error))
    except Exception:
        traceback.print_exc()
        print(f"upsertmat {args.command}: internal error (a bug; please report it)", file=sys.stderr)
        return int(ExitCode.INTERNAL)


if __name__ == "__main__":
    sys.exit(main())
