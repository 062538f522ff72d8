"""Replay a counterexample by hand: the implementation's output next to the model's, input by input.

    python -m upsertmat.conformance.reproduce --impl MAP/rocksdb --pk 0 --upsert-key 1 in.jsonl
    python -m upsertmat.conformance.reproduce --cmd "java -cp /tmp/um UpsertMaterializer" --pk 0 in.jsonl

The input is the JSON Lines of ``upsertmat replay`` (changes and ``{"time": T}`` clock lines),
e.g. a counterexample file the conformance report wrote. ``--set KEY=VALUE`` passes TTL
settings (as the suite does); ``--ttl-granularity per_key`` models one stamp per sink key (for
``--impl`` it follows from the strategy). Prints one line per input line whose outputs differ
(``in N``, the input, what the model emits, what the implementation emitted) or ``identical``;
a program that fails is reported with its stderr. Exit 0 when identical, 1 when they differ,
2 on bad arguments or input. Cost: one model run and one implementation run (or one process).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..impls import ConfigError, build_settings
from ..impls.config import parse_set_option
from ..impls.registry import UnknownImplementation, create_named
from ..spec import Change, Granularity, Keys, RowKind, TtlSettings
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
) -> list[list[Output]]:
    """The outputs of registry implementation (or ``module:factory``) ``name`` per input."""
    materializer = create_named(name, keys, build_settings([("--set", settings)]))
    outputs: list[list[Output]] = []
    try:
        for index, step in enumerate(steps):
            if isinstance(step, Advance):
                materializer.advance_time(step.time)
                outputs.append([])
            else:
                outputs.append(as_output(materializer.process(step), index))
    finally:
        materializer.close()
    return outputs


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
    parser.add_argument("input", type=Path, help="the counterexample, JSON Lines")
    args = parser.parse_args(argv)
    try:
        keys = Keys(pk=args.pk, upsert_key=args.upsert_key)
        steps = read_steps(args.input.read_text(encoding="utf-8").splitlines())
        settings = dict(parse_set_option(text) for text in args.set)
        ttl = build_settings([("--set", settings)]).ttl
    except (OSError, ValueError, ConfigError) as error:
        print(f"reproduce: {error}", file=sys.stderr)
        return 2
    if args.ttl_granularity:
        granularity = Granularity(args.ttl_granularity)
    elif args.impl and ttl.enabled and ":" not in args.impl:
        granularity = granularity_of(args.impl)
    else:
        granularity = Granularity.PER_ELEMENT
    expected = model_outputs(keys, steps, ttl if ttl.enabled else TtlSettings(), granularity)
    if args.impl:
        if ":" in args.impl and "" not in sys.path:
            sys.path.insert(0, "")  # module:factory names from the current directory, as pytest's
        try:
            actual = implementation_outputs(args.impl, keys, steps, settings)
        except (UnknownImplementation, ImportError, AttributeError) as error:
            print(f"reproduce: --impl {args.impl}: {error}", file=sys.stderr)
            return 2
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
    if not different:
        print(f"identical: {len(steps)} input line(s)")
    return 1 if different else 0


if __name__ == "__main__":
    sys.exit(main())
