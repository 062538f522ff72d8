"""Replay a counterexample by hand: the implementation's output next to the model's, input by input.

    python -m upsertmat.conformance.reproduce --impl MAP/rocksdb --pk 0 --upsert-key 1 in.jsonl
    python -m upsertmat.conformance.reproduce --cmd "java -cp /tmp/um UpsertMaterializer" --pk 0 in.jsonl
    python -m upsertmat.conformance.reproduce --workdir ../.. --impl mine:factory --pk 0 in.jsonl

The input is the JSON Lines of ``upsertmat replay`` (changes and ``{"time": T}`` clock lines),
e.g. a counterexample file the conformance report wrote. ``--set KEY=VALUE`` passes TTL
settings (as the suite does); ``--ttl-granularity per_key`` models one stamp per sink key (for
``--impl`` it follows from the strategy). ``--workdir DIR`` is the directory the suite ran in
(the report writes it, relative to the report's directory): a ``module:factory`` is imported
from it and a ``--cmd`` program runs in it, as under the suite; the input path stays relative
to the current directory. Prints one line per input line whose outputs differ (``in N``, the
input, what the model emits, what the implementation emitted) and, for ``--impl``, the final
``retract_misses`` when they differ (rule 7), or ``identical``; a program that fails is
reported with its stderr. Exit 0 when identical, 1 when they differ, 2 on bad arguments or
input. Cost: one model run and one implementation run (or one process).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ..impls import ConfigError, build_settings
from ..impls.config import parse_set_option
from ..impls.registry import UnknownImplementation, create_named
from ..spec import Change, Granularity, Keys, ModelMaterializer, RowKind, TtlSettings
from .generators import Advance, Step
from .lifecycle import granularity_of
from .program_checks import model_outputs
from .protocol import Output, Program, ProtocolError, as_output, by_input


def _columns(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def read_steps(lines: Sequence[str]) -> list[Step]:
    """JSON Lines to steps: a change (``op``, ``row``, optional ``ts``) or a clock line.
    ValueError naming the line (from 1) for anything else."""
    steps: list[Step] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
            if "time" in value:
                steps.append(Advance(int(value["time"])))
            else:
                steps.append(Change(RowKind.parse(value["op"]), tuple(value["row"]), value.get("ts")))
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(
                f"line {number}: not a change or a clock line ({error}): {line.strip()!r}"
            ) from None
    return steps


def implementation_outputs(
    name: str, keys: Keys, steps: Sequence[Step], settings: dict[str, str]
) -> tuple[list[list[Output]], int]:
    """The outputs of registry implementation (or ``module:factory``) ``name`` per input, and
    its ``retract_misses`` at the end."""
    materializer = create_named(name, keys, build_settings([("--set", settings)]))
    outputs: list[list[Output]] = []
    try:
        for index, step in enumerate(steps):
            if isinstance(step, Advance):
                materializer.advance_time(step.time)
                outputs.append([])
            else:
                outputs.append(as_output(materializer.process(step), index))
        return outputs, materializer.retract_misses
    finally:
        materializer.close()


def model_misses(keys: Keys, steps: Sequence[Step], ttl: TtlSettings, granularity: Granularity) -> int:
    """The model's ``retract_misses`` after ``steps``."""
    model = ModelMaterializer(keys, ttl, granularity)
    for step in steps:
        if isinstance(step, Advance):
            model.advance_time(step.time)
        else:
            model.process(step)
    return model.retract_misses


def differences(expected: Sequence[Sequence[Output]], actual: Sequence[Sequence[Output]]) -> list[int]:
    """Indexes of the inputs whose outputs differ (exact JSON types)."""
    return [
        index
        for index, (want, have) in enumerate(zip(expected, actual, strict=True))
        if [o.exact() for o in want] != [o.exact() for o in have]
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Compare; the exit code (module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m upsertmat.conformance.reproduce", description=__doc__)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--impl", metavar="NAME", help="STRATEGY/backend, an alias or module:factory")
    target.add_argument("--cmd", metavar="COMMAND", help="a program speaking the JSON Lines protocol")
    parser.add_argument("--pk", required=True, type=_columns, metavar="COLS")
    parser.add_argument("--upsert-key", default=(), type=_columns, metavar="COLS")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a TTL setting")
    parser.add_argument("--ttl-granularity", choices=("per_element", "per_key"))
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
    args = parser.parse_args(argv)
    try:
        keys = Keys(pk=args.pk, upsert_key=args.upsert_key)
        steps = read_steps(args.input.read_text(encoding="utf-8").splitlines())
        settings = dict(parse_set_option(text) for text in args.set)
        ttl = build_settings([("--set", settings)]).ttl
        if args.workdir is not None:
            workdir = args.workdir.resolve(strict=True)
            os.chdir(workdir)  # a program's relative paths, as under the suite
            sys.path.insert(0, str(workdir))  # module:factory names, as pytest's plugin does
    except (OSError, ValueError, ConfigError) as error:
        where = f"--workdir {args.workdir}: " if isinstance(error, OSError) and args.workdir else ""
        print(f"reproduce: {where}{error}", file=sys.stderr)
        return 2
    if args.ttl_granularity:
        granularity = Granularity(args.ttl_granularity)
    elif args.impl and ttl.enabled and ":" not in args.impl:
        granularity = granularity_of(args.impl)
    else:
        granularity = Granularity.PER_ELEMENT
    ttl = ttl if ttl.enabled else TtlSettings()
    expected = model_outputs(keys, steps, ttl, granularity)
    misses: tuple[int, int] | None = None
    if args.impl:
        if ":" in args.impl and "" not in sys.path:
            sys.path.insert(0, "")  # module:factory names from the current directory, as pytest's
        try:
            actual, impl_misses = implementation_outputs(args.impl, keys, steps, settings)
        except (UnknownImplementation, ImportError, AttributeError) as error:
            hint = (
                " (--workdir: the directory the suite ran in)"
                if ":" in args.impl and not args.workdir
                else ""
            )
            print(f"reproduce: --impl {args.impl}: {error}{hint}", file=sys.stderr)
            return 2
        misses = (model_misses(keys, steps, ttl, granularity), impl_misses)
    else:
        try:
            grouped = by_input(Program(args.cmd).run(keys, steps, settings))
        except ProtocolError as error:
            print(f"the program failed: {error}")
            return 1
        actual = [grouped.get(index, []) for index in range(len(steps))]
    different = differences(expected, actual)
    for index in different:
        print(
            f"in {index}: {steps[index]!r}: the model emits {list(expected[index]) or 'nothing'}, "
            f"the implementation {list(actual[index]) or 'nothing'}"
        )
    if misses is not None and misses[0] != misses[1]:
        model_count, impl_count = misses
        print(
            f"retract_misses after all input lines: the model {model_count}, the implementation {impl_count}"
        )
        different.append(len(steps))
    if not different:
        print(f"identical: {len(steps)} input line(s)")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
