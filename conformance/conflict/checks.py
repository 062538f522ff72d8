"""Driving a compacting materializer (or the model) through lines, and comparing with the model.

A *line* is a change or an ``int`` watermark; the end of the input is one more watermark at
line index ``len(lines)``. Emissions are ``(line index, change)`` pairs in output order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ...impls.conflict import CompactingMaterializer
from ...spec import Change, Conflict, ConflictBehavior, ConflictError, ConflictModel, Keys, Row

Line = Change | int
Emission = tuple[int, Change]
ConflictMaker = Callable[[Keys, ConflictBehavior], CompactingMaterializer]
"""Builds a fresh, empty implementation."""
KeyState = tuple[bytes, Row | None, list[tuple[bool, Row]]]


def watermark(target: ConflictModel | CompactingMaterializer, now: int) -> list[Change]:
    """A watermark at ``now`` on the model or an implementation; what it emits."""
    if isinstance(target, ConflictModel):
        return target.advance_time(now)
    return target.watermark(now)


def drive(
    target: ConflictModel | CompactingMaterializer, lines: Sequence[Line], *, finish: bool = True
) -> tuple[list[Emission], int | None]:
    """Feed ``lines`` (and the end, with ``finish``); the emissions and the line index of a
    ConflictError (None if none; the run stops there)."""
    emitted: list[Emission] = []
    for index, line in enumerate(lines):
        try:
            if isinstance(line, Change):
                target.process(line)
            else:
                emitted += [(index, change) for change in watermark(target, line)]
        except ConflictError:
            return emitted, index
    if finish:
        try:
            emitted += [(len(lines), change) for change in target.finish()]
        except ConflictError:
            return emitted, len(lines)
    return emitted, None


def normalized(items: Iterator[KeyState] | Sequence[KeyState]) -> list[KeyState]:
    """Key states without the keys that hold nothing (no current row, nothing pending), ascending."""
    return sorted(
        (context, current, list(pending)) for context, current, pending in items if current or pending
    )


def model_state(model: ConflictModel) -> list[KeyState]:
    """The model's state in :meth:`CompactingMaterializer.export_keys` form."""
    contexts = set(model.current) | set(model.pending)
    return normalized(
        (context, model.current.get(context), list(model.pending.get(context, []))) for context in contexts
    )


def _conflict_view(conflict: Conflict) -> tuple[bytes, Row | None, tuple[Row, ...]]:
    return conflict.context, conflict.current, conflict.survivors


@contextmanager
def opened(make: ConflictMaker, keys: Keys, behavior: ConflictBehavior) -> Iterator[CompactingMaterializer]:
    """A fresh implementation, closed afterwards."""
    materializer = make(keys, behavior)
    try:
        yield materializer
    finally:
        materializer.close()


def step_and_compare(
    impl: CompactingMaterializer, model: ConflictModel, index: int, line: Line, context: str
) -> None:
    """Feed one line to both; outputs, conflicts, misses and state must agree, and after a
    successful watermark the state must be bounded (:func:`check_bounded`).

    A watermark that fails with ConflictError must fail alike in both and change no state,
    so the run can go on (the next watermark retries the same keys).
    """
    before = model.last_watermark
    outcomes: list[Any] = []
    for target in (model, impl):
        try:
            if isinstance(line, Change):
                target.process(line)
                outcomes.append([])
            else:
                outcomes.append(watermark(target, line))
        except ConflictError as error:
            outcomes.append(("conflict", _conflict_view(error.conflict)))
    expected, got = outcomes
    assert got == expected, f"{context}: line {index} {line!r}: model {expected!r}, implementation {got!r}"
    assert impl.retract_misses == model.retract_misses, f"{context}: line {index}: misses differ"
    got_conflicts = [_conflict_view(conflict) for conflict in impl.conflicts]
    assert got_conflicts == [_conflict_view(conflict) for conflict in model.conflicts], context
    impl.conflicts, model.conflicts = [], []  # drained, as a driver does after each watermark
    assert normalized(impl.export_keys()) == model_state(model), f"{context}: line {index}: state differs"
    assert impl.last_watermark == model.last_watermark, f"{context}: line {index}: watermarks differ"
    if model.last_watermark != before:  # a watermark happened (and succeeded)
        check_bounded(impl, context)


def check_bounded(impl: CompactingMaterializer, context: str) -> None:
    """The bounded-state property after a watermark: at most one row per key, nothing pending."""
    stats = impl.stats()
    assert stats["pending"] == 0 and stats["pending_keys"] == 0, (
        f"{context}: pending after a watermark: {stats}"
    )
    assert stats["rows"] == stats["keys"], f"{context}: more than one row per key: {stats}"
    for _, current, pending in impl.export_keys():
        assert current is not None and not pending, (
            f"{context}: a key holds pending changes after a watermark"
        )


def check_lines_against_model(
    make: ConflictMaker,
    keys: Keys,
    lines: Sequence[Line],
    behavior: ConflictBehavior,
    *,
    skip_conflicts: bool = False,
) -> None:
    """Differential check, line by line, then the end of the input."""
    model = ConflictModel(keys, behavior, skip_conflicts=skip_conflicts)
    with opened(make, keys, behavior) as impl:
        impl.skip_conflicts = skip_conflicts
        for index, line in enumerate(lines):
            step_and_compare(impl, model, index, line, behavior.value)
        outcomes: list[Any] = []
        for target in (model, impl):
            try:
                outcomes.append(target.finish())
            except ConflictError as error:
                outcomes.append(("conflict", _conflict_view(error.conflict)))
        assert outcomes[1] == outcomes[0], (
            f"{behavior.value}: at the end: model {outcomes[0]!r}, impl {outcomes[1]!r}"
        )
        if not isinstance(outcomes[0], tuple):
            check_bounded(impl, behavior.value)
        assert normalized(impl.export_keys()) == model_state(model), f"{behavior.value}: state at the end"
