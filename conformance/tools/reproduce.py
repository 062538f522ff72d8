"""Replay a counterexample by hand: the implementation's output next to the model's, input by input.

What ``upsertmat conformance-reproduce`` runs (docs/conformance.md)::

    upsertmat conformance-reproduce --impl MAP/rocksdb --pk 0 --upsert-key 1 in.jsonl
    upsertmat conformance-reproduce --cmd "java -cp /tmp/um UpsertMaterializer" --pk 0 in.jsonl
    upsertmat conformance-reproduce --workdir ../.. --impl mine:factory --pk 0 in.jsonl

The input is the JSON Lines of ``upsertmat replay`` (changes and ``{"time": T}`` clock lines),
e.g. a counterexample file the conformance report wrote. ``--set KEY=VALUE`` passes TTL
settings (as the suite does); ``--ttl-granularity per_key`` models one stamp per sink key (for
``--impl`` it follows from the strategy). ``--workdir DIR`` is the directory the suite ran in
(the report writes it, relative to the report's directory): a ``module:factory`` is imported
from it and a ``--cmd`` program runs in it, as under the suite; the input path stays relative
to the current directory. Prints one line per input line whose outputs differ (``in N``, the
input, what the model emits, what the implementation emitted) and, for ``--impl``, the final
``retract_misses`` when they differ (rule 7), or ``identical``; a program that fails is
reported with its stderr. :func:`reproduce` compares; the command prints it (exit 0 when
identical, 1 when they differ, 2 on bad arguments or input). Cost: one model run and one
implementation run (or one process).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from ...impls import build_settings
from ...impls.registry import create_named
from ...spec import Change, Granularity, Keys, ModelMaterializer, RowKind, TtlSettings
from ..generators import Advance, Step
from ..lifecycle import granularity_of
from ..program.checks import model_outputs
from ..protocol import Output, Program, ProtocolError, as_output, by_input


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


@dataclass(frozen=True)
class Reproduction:
    """A counterexample replayed: ``steps`` fed, the model's outputs and the implementation's per
    input (``expected``, ``actual``), the inputs whose outputs differ, and ``misses`` (the
    model's and the implementation's final ``retract_misses``; None for a program, whose
    protocol does not carry them); ``failed``: the program's error (then ``actual`` is empty)."""

    steps: list[Step]
    expected: list[list[Output]]
    actual: list[list[Output]]
    different: list[int]
    misses: tuple[int, int] | None = None
    failed: str | None = None

    @property
    def identical(self) -> bool:
        """Nothing differs (outputs, and ``retract_misses`` where known) and nothing failed."""
        misses_differ = self.misses is not None and self.misses[0] != self.misses[1]
        return not self.different and not misses_differ and self.failed is None


def reproduce(
    keys: Keys,
    steps: list[Step],
    settings: dict[str, str],
    *,
    impl: str | None = None,
    cmd: str | None = None,
    granularity: Granularity | None = None,
) -> Reproduction:
    """Feed ``steps`` to the model and to ``impl`` (registry name, alias or ``module:factory``)
    or the program ``cmd``, with the TTL ``settings``; compare per input.

    ``granularity``: the model's TTL granularity (default: the strategy's for a registry name
    with TTL on, else per element). ConfigError for bad settings; UnknownImplementation,
    ImportError or AttributeError for an ``impl`` that cannot be built."""
    ttl = build_settings([("--set", settings)]).ttl
    if granularity is None:
        granularity = (
            granularity_of(impl) if impl and ttl.enabled and ":" not in impl else Granularity.PER_ELEMENT
        )
    ttl = ttl if ttl.enabled else TtlSettings()
    expected = model_outputs(keys, steps, ttl, granularity)
    if impl is not None:
        actual, impl_misses = implementation_outputs(impl, keys, steps, settings)
        misses = (model_misses(keys, steps, ttl, granularity), impl_misses)
        return Reproduction(steps, expected, actual, differences(expected, actual), misses)
    assert cmd is not None, "give impl or cmd"
    try:
        grouped = by_input(Program(cmd).run(keys, steps, settings))
    except ProtocolError as error:
        return Reproduction(steps, expected, [], [], failed=str(error))
    actual = [grouped.get(index, []) for index in range(len(steps))]
    return Reproduction(steps, expected, actual, differences(expected, actual))
