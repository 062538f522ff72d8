"""``upsertmat conformance-reproduce``: replay a counterexample against the model, input by input.

The conformance report writes each failure's input next to its page with this command (run in
the page's directory). The comparison is :func:`upsertmat.conformance.tools.reproduce.reproduce`;
this module parses, changes into ``--workdir`` and prints one line per input whose outputs
differ (``in N``, the input, what the model emits, what the implementation emitted), the final
``retract_misses`` when they differ (``--impl``), or ``identical``. Needs the ``conformance``
extra.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from upsertmat.commands.options import parse_columns
from upsertmat.errors import CliError, ExitCode
from upsertmat.impls import ConfigError
from upsertmat.impls.config import parse_set_option
from upsertmat.impls.registry import UnknownImplementation
from upsertmat.spec import Granularity, Keys

NAME = "conformance-reproduce"
EPILOG = """\
examples (in the report page's directory, as the page writes them):
  upsertmat conformance-reproduce --impl MAP/rocksdb --pk 0 --upsert-key 1 NAME.TEST.jsonl
  upsertmat conformance-reproduce --workdir .. --impl mine:factory --pk 0 NAME.TEST.jsonl
  upsertmat conformance-reproduce --cmd "java -cp /tmp/um UpsertMaterializer" --pk 0 in.jsonl

exit codes: 0 identical, 1 the outputs differ (or the program failed), 2 usage error (a bad
  option, an unreadable or malformed input, an implementation that cannot be built).
"""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``upsertmat conformance-reproduce``."""
    parser = subparsers.add_parser(
        NAME,
        help="replay a conformance counterexample: the implementation's output next to the model's",
        description="Feed a counterexample (the JSON Lines of 'upsertmat replay', e.g. one a conformance "
        "report wrote) to the reference model and to an implementation (--impl) or a program (--cmd), "
        "and print every input whose outputs differ.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--impl", metavar="NAME", help="STRATEGY/backend, an alias or module:factory")
    target.add_argument("--cmd", metavar="COMMAND", help="a program speaking the JSON Lines protocol")
    parser.add_argument("--pk", required=True, type=parse_columns, metavar="COLS", help="sink primary key")
    parser.add_argument("--upsert-key", default=(), type=parse_columns, metavar="COLS", help="upsert key")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a TTL setting (repeatable)"
    )
    parser.add_argument(
        "--ttl-granularity",
        choices=("per_element", "per_key"),
        help="the model's TTL granularity (default: the strategy's for --impl, else per_element)",
    )
    parser.add_argument(
        "--workdir",
        type=Path,
        metavar="DIR",
        help="the directory the suite ran in: module:factory names import from it, a --cmd program "
        "runs in it (relative to the current directory)",
    )
    parser.add_argument(
        "input", type=Path, help="the counterexample, JSON Lines (relative to the current directory)"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Compare; print the differences; 0 identical, 1 different."""
    from upsertmat.conformance.tools.reproduce import read_steps, reproduce  # the extra: see cli.py

    try:
        keys = Keys(pk=args.pk, upsert_key=args.upsert_key)
        steps = read_steps(args.input.read_text(encoding="utf-8").splitlines())
        settings = dict(parse_set_option(text) for text in args.set)
        if args.workdir is not None:
            workdir = args.workdir.resolve(strict=True)
            os.chdir(workdir)  # a program's relative paths, as under the suite
            sys.path.insert(0, str(workdir))  # module:factory names, as pytest's plugin does
    except OSError as error:
        where = f"--workdir {args.workdir}: " if args.workdir else ""
        raise CliError(f"{where}{error.strerror or error}: {error.filename}") from None
    except (ValueError, ConfigError) as error:
        raise CliError(str(error)) from None
    if args.impl and ":" in args.impl and "" not in sys.path:
        sys.path.insert(0, "")  # module:factory names from the current directory, as pytest's
    granularity = Granularity(args.ttl_granularity) if args.ttl_granularity else None
    try:
        found = reproduce(keys, steps, settings, impl=args.impl, cmd=args.cmd, granularity=granularity)
    except ConfigError as error:
        raise CliError(str(error)) from None
    except (UnknownImplementation, ImportError, AttributeError) as error:
        hint = " (--workdir: the directory the suite ran in)" if ":" in args.impl and not args.workdir else ""
        raise CliError(f"--impl {args.impl}: {error}{hint}") from None
    if found.failed is not None:
        print(f"the program failed: {found.failed}")
        return int(ExitCode.BAD_INPUT)
    for index in found.different:
        print(
            f"in {index}: {steps[index]!r}: the model emits {list(found.expected[index]) or 'nothing'}, "
            f"the implementation {list(found.actual[index]) or 'nothing'}"
        )
    if found.misses is not None and found.misses[0] != found.misses[1]:
        model_count, impl_count = found.misses
        print(
            f"retract_misses after all input lines: the model {model_count}, the implementation {impl_count}"
        )
    if found.identical:
        print(f"identical: {len(steps)} input line(s)")
        return int(ExitCode.OK)
    return int(ExitCode.BAD_INPUT)
