"""The ``upsertmat`` command line: a top-level parser and one module per subcommand.

A subcommand module exposes ``add_parser(subparsers)``, which registers its parser and sets
the default ``run`` to a function ``(argparse.Namespace) -> int`` (the exit code). Adding a
command is adding its module to :data:`SUBCOMMANDS`. Errors go to stderr as
``upsertmat COMMAND: MESSAGE`` with the exit codes of :class:`upsertmat.errors.ExitCode`;
data goes to stdout. When stdout's reader goes away (``upsertmat inspect SP | head -1``), every
command exits 141 without a message, as Unix tools do on SIGPIPE.
"""

from __future__ import annotations

import argparse
import os
import select
import stat
import sys
import traceback
from collections.abc import Callable, Sequence

from upsertmat import __version__
from upsertmat.commands import (
    bench,
    check_keys,
    client,
    conformance,
    conformance_flink,
    conformance_matrix,
    conformance_reproduce,
    demo,
    gateway,
    plan,
    replay,
    run,
    savepoint,
)
from upsertmat.errors import CliError, ExitCode, StateDirError, exit_code_of
from upsertmat.impls.build import build_name
from upsertmat.interrupt import StopSignals, interrupted
from upsertmat.stdout import silence

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
    conformance_reproduce.add_parser,
    conformance_matrix.add_parser,
    conformance_flink.add_parser,
    gateway.add_parser,
    client.add_parser,
)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="upsertmat",
        description="Sink upsert materialization: the executable specification, its "
        "implementations and tools. Run 'upsertmat COMMAND --help' for a command's options.",
        epilog="exit codes: 0 ok, 1 bad input, 2 usage or configuration error, 3 state "
        "directory problem, 4 I/O error, 70 internal error, 130/143 interrupted, 141 stdout's "
        "reader went away.",
    )
    parser.add_argument("--version", action="version", version=f"upsertmat {__version__} ({build_name()})")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for add_parser in SUBCOMMANDS:
        add_parser(subparsers)
    return parser


def stdout_reader_gone() -> bool:
    """True if file descriptor 1 is a pipe or socket whose reading end is closed.

    Tells a ``BrokenPipeError`` from writing the command's output (the reader left: not an
    error) from one raised by anything else (a socket, a child process: a bug). One ``fstat``
    and one ``poll``; never blocks.
    """
    try:
        if not stat.S_ISFIFO(mode := os.fstat(1).st_mode) and not stat.S_ISSOCK(mode):
            return False
        poller = select.poll()
        poller.register(1, 0)  # POLLERR and POLLHUP are always reported
        return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))
    except OSError:
        return False


def _flushed(code: int) -> int:
    """``code`` once stdout is flushed (inside ``main``, where a closed pipe is recognised)."""
    try:
        if sys.stdout is not None:  # None when the process was started with fd 1 closed
            sys.stdout.flush()
    except BrokenPipeError:
        if stdout_reader_gone():
            return silence()
        raise
    return code


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    SIGINT and SIGTERM end any command with one line and 130 / 143 (:mod:`upsertmat.interrupt`;
    commands that stop at a boundary say more)."""
    signals = StopSignals("upsertmat")
    try:
        with signals:
            return _main(argv, signals)
    except KeyboardInterrupt as stop:
        return interrupted(signals.prefix, stop)


def _main(argv: Sequence[str] | None, signals: StopSignals) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, or a usage error (argparse printed it)
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else ExitCode.USAGE)
        return _flushed(int(code))
    if args.command is None:
        parser.print_help(sys.stderr)
        return ExitCode.USAGE
    signals.prefix = f"upsertmat {args.command}"
    try:
        return _flushed(int(args.run(args)))
    except CliError as error:
        print(f"upsertmat {args.command}: {error.message}", file=sys.stderr)
        return int(error.code)
    except StateDirError as error:
        print(f"upsertmat {args.command}: {error.message}", file=sys.stderr)
        return int(exit_code_of(error))
    except Exception as error:
        if isinstance(error, BrokenPipeError) and stdout_reader_gone():
            return silence()
        traceback.print_exc()
        print(f"upsertmat {args.command}: internal error (a bug; please report it)", file=sys.stderr)
        return int(ExitCode.INTERNAL)
