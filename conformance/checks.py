"""Check functions: run an implementation and fail with a precise AssertionError.

They take a *maker* ``(Keys) -> Materializer`` so each check builds fresh implementations and
always closes them (implementations may hold files and locks). Outputs are compared exactly
(kind, row with exact JSON types, order) after EVERY input, and ``retract_misses`` with it. A
difference, or an exception the implementation raises (other than ``Unsupported``), fails
with a :class:`~.mismatch.Mismatch` carrying every input fed and naming the rule it breaks (a
crash is chained, so its traceback shows).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from ..spec import Change, Granularity, Keys, Materializer, ModelMaterializer, TtlSettings, Unsupported
from .generators import Advance, GeneratedStream, Step, TimedStream
from .mismatch import Differs, Mismatch
from .scenarios import Scenario, TtlScenario

Maker = Callable[[Keys], Materializer]


@contextmanager
def opened(make: Maker, keys: Keys) -> Iterator[Materializer]:
    """A fresh implementation for ``keys``, closed on exit (even when a check fails)."""
    materializer = make(keys)
    try:
        yield materializer
    finally:
        materializer.close()


def _answer(materializer: Materializer, step: Step) -> Change | None:
    """Feed one input: a change is processed, a clock line advances the clock (no output)."""
    if isinstance(step, Advance):
        materializer.advance_time(step.time)
        return None
    return materializer.process(step)


def _outputs(change: Change | None) -> tuple[Change, ...]:
    return () if change is None else (change,)


def _history(inputs: Iterable[Step], upto: int) -> str:
    lines = [f"  [{i}] {change!r}" for i, change in enumerate(inputs) if i <= upto]
    return "\n".join(lines[-12:])


def crashed(
    error: Exception,
    place: str,
    keys: Keys,
    steps: Sequence[Step],
    expected: Change | None,
    ttl: TtlSettings | None = None,
    granularity: Granularity = Granularity.PER_ELEMENT,
) -> Mismatch:
    """The :class:`Mismatch` for an implementation that raised ``error`` at the last of
    ``steps`` (``place`` names that input); raise it ``from error``, so the traceback shows."""
    wanted = "" if isinstance(steps[-1], Advance) else f" (expected {expected!r})"
    return Mismatch(
        f"{place}: the implementation raised {type(error).__name__}: {error}{wanted}\n"
        f"inputs so far:\n{_history(steps, len(steps) - 1)}",
        keys=keys,
        steps=steps,
        actual=(),
        expected=_outputs(expected),
        ttl=ttl,
        granularity=granularity,
        differs=Differs.CRASH,
    )


def _replay_as_written(
    materializer: Materializer,
    label: str,
    unit: str,
    steps: tuple[Step, ...],
    expected: tuple[object, ...],
    misses: int,
    note: str | None,
    keys: Keys,
    ttl: TtlSettings | None = None,
    granularity: Granularity = Granularity.PER_ELEMENT,
) -> None:
    """Feed ``steps`` (advancing the clock at each Advance); every output and the final miss
    count must be as written. ``label`` names the scenario in messages, ``unit`` its steps."""
    __tracebackhide__ = True  # a failure shows the check's message, not its code
    for index, (step, want) in enumerate(zip(steps, expected, strict=True)):
        written = want if isinstance(want, Change) else None
        try:
            actual = _answer(materializer, step)
        except Unsupported:
            raise
        except Exception as error:
            place = f"{label}, {unit} [{index}] {step!r}"
            raise crashed(error, place, keys, steps[: index + 1], written, ttl, granularity) from error
        if isinstance(step, Advance):
            continue
        if actual != want:
            raise Mismatch(
                f"{label}, {unit} [{index}] {step!r}: expected {want!r}, "
                f"got {actual!r}\n{unit}s so far:\n{_history(steps, index)}"
                + (f"\nnote: {note}" if note else ""),
                keys=keys,
                steps=steps[: index + 1],
                actual=_outputs(actual),
                expected=_outputs(written),
                ttl=ttl,
                granularity=granularity,
            )
    if materializer.retract_misses != misses:
        raise Mismatch(
            f"{label}: expected retract_misses == {misses}, got {materializer.retract_misses} "
            f"after all {len(steps)} {unit}s:\n{_history(steps, len(steps) - 1)}",
            keys=keys,
            steps=steps,
            misses=(misses, materializer.retract_misses),
            ttl=ttl,
            granularity=granularity,
            differs=Differs.MISSES,
        )


def check_scenario(make: Maker, scenario: Scenario) -> None:
    """Feed the scenario's inputs; each output and the final miss count must be as written."""
    __tracebackhide__ = True  # a failure shows the check's message, not its code
    with opened(make, scenario.keys) as materializer:
        _replay_as_written(
            materializer,
            f"scenario {scenario.name!r}",
            "input",
            tuple(scenario.inputs),
            tuple(scenario.expected),
            scenario.misses,
            scenario.note,
            scenario.keys,
        )


def check_against_model(
    make: Maker,
    keys: Keys,
    changes: Iterable[Step],
    ttl: TtlSettings | None = None,
    granularity: Granularity = Granularity.PER_ELEMENT,
) -> None:
    """Differential check: the implementation and the model side by side, input by input.

    ``changes`` may hold clock advances (:class:`Advance`), fed to both. ``ttl`` and
    ``granularity`` configure the model; ``make`` must build an implementation with the same
    TTL settings.
    """
    __tracebackhide__ = True  # a failure shows the check's message, not its code
    inputs = list(changes)
    model = ModelMaterializer(keys, ttl, granularity)
    with opened(make, keys) as materializer:
        for index, change in enumerate(inputs):
            expected = _answer(model, change)
            try:
                actual = _answer(materializer, change)
            except Unsupported:
                raise
            except Exception as error:
                place = f"input [{index}] {change!r}"
                raise crashed(error, place, keys, inputs[: index + 1], expected, ttl, granularity) from error
            if isinstance(change, Advance):
                continue
            if actual != expected:
                raise Mismatch(
                    f"input [{index}] {change!r}: the model emits {expected!r}, the implementation "
                    f"{actual!r}\ninputs so far:\n{_history(inputs, index)}",
                    keys=keys,
                    steps=inputs[: index + 1],
                    actual=_outputs(actual),
                    expected=_outputs(expected),
                    ttl=ttl,
                    granularity=granularity,
                )
            if materializer.retract_misses != model.retract_misses:
                raise Mismatch(
                    f"after input [{index}] {change!r}: retract_misses is {materializer.retract_misses}, "
                    f"the model counts {model.retract_misses}\ninputs so far:\n{_history(inputs, index)}",
                    keys=keys,
                    steps=inputs[: index + 1],
                    actual=_outputs(actual),
                    expected=_outputs(expected),
                    misses=(model.retract_misses, materializer.retract_misses),
                    ttl=ttl,
                    granularity=granularity,
                    differs=Differs.MISSES,
                )


def check_timed_stream(
    make: Maker, stream: TimedStream, ttl: TtlSettings, granularity: Granularity = Granularity.PER_ELEMENT
) -> None:
    """:func:`check_against_model` on a stream with clock advances, under ``ttl``."""
    __tracebackhide__ = True  # a failure shows the check's message, not its code
    check_against_model(make, stream.keys, stream.steps, ttl, granularity)


def check_ttl_scenario(make: Maker, scenario: TtlScenario) -> None:
    """Feed a TTL scenario (``make`` builds with ``scenario.ttl``); outputs exactly as written."""
    __tracebackhide__ = True  # a failure shows the check's message, not its code
    with opened(make, scenario.keys) as materializer:
        _replay_as_written(
            materializer,
            f"TTL scenario {scenario.name!r}",
            "step",
            tuple(scenario.steps),
            tuple(scenario.expected),
            scenario.misses,
            scenario.note,
            scenario.keys,
            scenario.ttl,
            scenario.granularity,
        )


def check_stream(make: Maker, stream: GeneratedStream) -> None:
    """:func:`check_against_model` on the stream's arrival order."""
    __tracebackhide__ = True  # a failure shows the check's message, not its code
    check_against_model(make, stream.keys, stream.arrival)
