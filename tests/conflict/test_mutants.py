"""The conflict suite's checks catch deliberately broken compacting materializers.

Each mutant changes one rule; the scenario catalogue (and, for the atomicity mutant, the
line-by-line differential check) must fail on it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from upsertmat.conformance.conflict.checks import check_lines_against_model, drive, opened
from upsertmat.conformance.conflict.scenarios import CONFLICT_SCENARIOS
from upsertmat.impls.conflict import CompactingMaterializer
from upsertmat.impls.conflict.fold import fold_pending
from upsertmat.impls.state import HeapBackend
from upsertmat.spec import Change, Conflict, ConflictBehavior, Keys, Row, RowKind, insert


class NoCancellation(CompactingMaterializer):
    """C1 broken: pending changes are folded without cancelling identical pairs."""

    def _pending_of(self, context: bytes) -> list[tuple[bool, Row]]:
        entries = sorted(self._pending.items(context))
        return [(bool(value[0]), tuple(value[1])) for _, value in entries]


class EmitsUnchanged(CompactingMaterializer):
    """C4 broken: a survivor equal to the current row is emitted as +U."""

    def _outcome(self, context: bytes) -> tuple[Row | None, Change | None, int, Conflict | None]:
        current, emitted, misses, conflict = super()._outcome(context)
        if (
            emitted is None
            and conflict is None
            and current is not None
            and self._current.get(context) is not None
        ):
            emitted = Change(RowKind.UPDATE_AFTER, current)
        return current, emitted, misses, conflict


class LastSurvivorWins(CompactingMaterializer):
    """C6 broken: NOTHING without a current row inserts the LAST survivor."""

    def _outcome(self, context: bytes) -> tuple[Row | None, Change | None, int, Conflict | None]:
        current, emitted, misses, conflict = super()._outcome(context)
        if emitted is not None and emitted.kind is RowKind.INSERT and self._current.get(context) is None:
            survivors, _ = fold_pending(None, self._pending_of(context), self.keys)
            emitted = Change(RowKind.INSERT, survivors[-1])
            current = survivors[-1]
        return current, emitted, misses, conflict


class StoredDeleteLost(CompactingMaterializer):
    """C4 broken: a key left without survivors keeps its current row (no -D)."""

    def _outcome(self, context: bytes) -> tuple[Row | None, Change | None, int, Conflict | None]:
        current, emitted, misses, conflict = super()._outcome(context)
        if emitted is not None and emitted.kind is RowKind.DELETE:
            return emitted.row, None, misses, conflict
        return current, emitted, misses, conflict


MUTANTS: dict[str, type[CompactingMaterializer]] = {
    "no-cancellation": NoCancellation,
    "emits-unchanged": EmitsUnchanged,
    "last-survivor-wins": LastSurvivorWins,
    "stored-delete-lost": StoredDeleteLost,
}


def maker(cls: type[CompactingMaterializer]) -> Callable[[Keys, ConflictBehavior], CompactingMaterializer]:
    return lambda keys, behavior: cls(keys, HeapBackend(), behavior)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_the_catalogue_catches_the_mutant(name: str) -> None:
    make = maker(MUTANTS[name])
    failures = []
    for scenario in CONFLICT_SCENARIOS:
        for behavior in (ConflictBehavior.NOTHING, ConflictBehavior.ERROR):
            with opened(make, scenario.keys, behavior) as materializer:
                if drive(materializer, scenario.lines) != (
                    list(scenario.expected(behavior)[0]),
                    scenario.expected(behavior)[1],
                ):
                    failures.append((scenario.name, behavior))
    assert failures, f"mutant {name} passes the whole catalogue"


def test_the_differential_check_catches_a_mutant_on_a_plain_stream() -> None:
    lines: list[Change | int] = [insert(1, 0, "a"), insert(1, 0, "b"), 1]
    with pytest.raises(AssertionError):
        check_lines_against_model(maker(LastSurvivorWins), Keys(pk=(0,)), lines, ConflictBehavior.NOTHING)
