"""The ``upsertmat`` command line: a top-level parser and one module per subcommand.

A subcommand module exposes ``add_parser(subparsers)``, which registers its parser and sets
the default ``run`` to a function ``(argparse.Namespace) -> int`` (the exit code). Adding a
command is adding its module to :data:`SUBCOMMANDS`. Errors go to stderr as
``upsertmat COMMAND: MESSAGE`` with the exit codes of :class:`upsertmat.errors.ExitCode`;
data goes to stdout. When stdout's reader goes away (``upsertmat inspect SP | head -1``), every
command exits 141 without a message, as Unix tools do on SIGPIPE. A command whose optional
dependency is not installed (the module a ``ModuleNotFoundError`` names is one an extra of
pyproject.toml provides) says which extra in one line and exits 2 (:func:`missing_extra`): that
is decided here, for every command, not by each command.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
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
from upsertmat.impls.build import build_name, needs_extra
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
        "directory problem, 4 I/O error, 70 internal error, 75 transient failure (run it again), "
        "130/143 interrupted, 141 stdout's "
        "reader went away.",
    )
    parser.add_argument("--version", action="version", version=f"upsertmat {__version__} ({build_name()})")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    for add_parser in SUBCOMMANDS:
        add_parser(subparsers)
    return parser


COMMAND_EXTRAS: dict[str, str] = {
    "run": "spark",
    "demo": "spark",
    "execute-plan": "spark",
    "gateway": "gateway",
    "client": "gateway",
    "conformance": "conformance",
    "conformance-reproduce": "conformance",
    "conformance-matrix": "conformance",
    "conformance-flink": "flink",
}
"""The extra a command needs as a whole, named when the missing module is one of its own (the
``client`` missing ``rich`` needs ``gateway``, not the smaller ``spark`` that has it too). A
command not listed (``bench``: plots, the pipeline, the gateway by mode) gets the smallest extra
providing the module."""

MODULE_DISTRIBUTIONS: dict[str, str] = {"pyflink": "apache-flink"}
"""Top-level modules whose distribution is not named after them (the others are: ``prometheus_client``
is ``prometheus-client``)."""

_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?")
_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _normal(name: str) -> str:
    """A distribution name as PEP 503 compares it (``Prometheus_Client`` -> ``prometheus-client``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def extras_providing() -> dict[str, set[str]]:
    """Each extra of the installed upsertmat -> the distributions it installs (an extra naming
    ``upsertmat[spark]`` includes spark's), read from the package's metadata (pyproject.toml's
    ``optional-dependencies``). Empty when upsertmat's metadata is not installed. O(requirements)."""
    try:
        requirements = importlib.metadata.requires("upsertmat") or []
    except importlib.metadata.PackageNotFoundError:
        return {}
    direct: dict[str, set[str]] = {}
    nested: dict[str, set[str]] = {}
    for text in requirements:
        requirement, marker = _REQUIREMENT.match(text), _EXTRA_MARKER.search(text)
        if requirement is None or marker is None:
            continue  # a base dependency
        name, extra = _normal(requirement.group(1)), marker.group(1)
        if name == "upsertmat":
            nested.setdefault(extra, set()).update(e.strip() for e in (requirement.group(2) or "").split(","))
        else:
            direct.setdefault(extra, set()).add(name)
    closed: dict[str, set[str]] = {}

    def close(extra: str, seen: frozenset[str]) -> set[str]:
        if extra not in closed:
            names = set(direct.get(extra, set()))
            for inner in nested.get(extra, set()) - seen:
                names |= close(inner, seen | {extra})
            closed[extra] = names
        return closed[extra]

    return {extra: close(extra, frozenset()) for extra in {*direct, *nested}}


def missing_extra(command: str, error: ModuleNotFoundError) -> str | None:
    """The extra to install for ``command`` when ``error`` names a module one of upsertmat's
    extras provides; None for any other module (a missing base dependency, a bug)."""
    if not error.name:
        return None
    module = error.name.partition(".")[0]
    distribution = _normal(MODULE_DISTRIBUTIONS.get(module, module))
    extras = extras_providing()
    candidates = sorted(
        (name for name, names in extras.items() if distribution in names), key=lambda e: (len(extras[e]), e)
    )
    if not candidates:
        return None
    own = COMMAND_EXTRAS.get(command)
    return own if own in candidates else candidates[0]


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
    except ModuleNotFoundError as error:
        extra = missing_extra(args.command, error)
        if extra is None:
            return _internal_error(args.command)
        detail = f" (no module named {error.name!r})"
        print(f"upsertmat {args.command}: {needs_extra(extra, detail)}", file=sys.stderr)
        return int(ExitCode.USAGE)
    except Exception as error:
        if isinstance(error, BrokenPipeError) and stdout_reader_gone():
            return silence()
        return _internal_error(args.command)


def _internal_error(command: str) -> int:
    """The traceback of the exception being handled, one line saying it is a bug, exit 70."""
    traceback.print_exc()
    print(f"upsertmat {command}: internal error (a bug; please report it)", file=sys.stderr)
    return int(ExitCode.INTERNAL)
