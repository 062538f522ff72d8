"""Mutation checks: the suite must FAIL on each of these deliberately broken LEGACY variants.

Each mutant is LEGACY on the heap with exactly one defect. For each one, the hand-written
catalogue, a Hypothesis differential run and the state machine are run directly (fast
settings: generation only, no shrinking) and must raise a Mismatch that carries the inputs fed
and names the rule of docs/spec.md the defect breaks (the state machine, which compares the
stored rows after every step, at the very input where the defect acts; the others where it
becomes visible); the unmodified LEGACY passes the same three checks (so the checks fail
because of the defect).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable

import pytest
from hypothesis import Phase, given, settings
from hypothesis.stateful import run_state_machine_as_test

from upsertmat.conformance.checks import Maker, check_scenario, check_stream
from upsertmat.conformance.generators import GeneratedStream, any_streams
from upsertmat.conformance.machine import MaterializerMachine
from upsertmat.conformance.mismatch import find_mismatch
from upsertmat.conformance.scenarios import SCENARIOS
from upsertmat.impls import Settings
from upsertmat.impls.state import open_backend
from upsertmat.impls.strategies.legacy import LegacyMaterializer
from upsertmat.spec import Change, Keys, Materializer, Row, RowKind


class Defect(enum.Enum):
    NONE = "none"
    REMOVE_LAST_MATCH = "a retraction removes the LAST match instead of the first"
    DELETE_CARRIES_STORED = "the emptying -D carries the stored row, not the incoming one"
    INSERT_ON_NON_EMPTY = "every ADD emits +I, also into a non-empty key"
    EMIT_ON_RULE_10 = "removing a non-last element emits +U of the last"
    MISSES_NOT_COUNTED = "rule-7 misses are not counted"
    APPEND_WITH_UPSERT_KEY = "with an upsert key an ADD appends instead of replacing in place"
    CRASH_ON_ROLLBACK = "removing the last of several rows raises instead of emitting +U of the new last"


class MutantLegacy(LegacyMaterializer):
    """LEGACY with one defect (rules 1-11 re-stated on LEGACY's stored list)."""

    def __init__(self, keys: Keys, defect: Defect) -> None:
        super().__init__(keys, open_backend(Settings()))
        self.defect = defect

    def process(self, change: Change) -> Change | None:
        """The defective rules on the stored list, committed per input."""
        emitted = self._apply(change)
        self.backend.commit()
        return emitted

    def process_many(
        self, changes: Iterable[Change], out: list[Change | None] | None = None
    ) -> list[Change | None]:
        out = [] if out is None else out
        out.extend(self.process(change) for change in changes)
        return out

    def _apply(self, change: Change, stamp: int = 0) -> Change | None:
        context = self.keys.context_key(change.row)
        rows: list[Row] = [tuple(row) for row in self._state.get(context) or ()]
        matches = [
            i for i, row in enumerate(rows) if self.keys.match_key(row) == self.keys.match_key(change.row)
        ]
        if change.kind.is_add:
            kind = (
                RowKind.UPDATE_AFTER
                if rows and self.defect is not Defect.INSERT_ON_NON_EMPTY
                else RowKind.INSERT
            )
            if matches and self.keys.has_upsert_key and self.defect is not Defect.APPEND_WITH_UPSERT_KEY:
                rows[matches[0]] = change.row
            else:
                rows.append(change.row)
            self._state.put(context, rows)
            return Change(kind, change.row)
        if not matches:
            if self.defect is not Defect.MISSES_NOT_COUNTED:
                self.retract_misses += 1
            return None
        index = matches[-1] if self.defect is Defect.REMOVE_LAST_MATCH else matches[0]
        removed = rows.pop(index)
        if not rows:
            self._state.delete(context)
            return Change(
                RowKind.DELETE, removed if self.defect is Defect.DELETE_CARRIES_STORED else change.row
            )
        self._state.put(context, rows)
        if index == len(rows) and self.defect is Defect.CRASH_ON_ROLLBACK:
            raise IndexError("no rollback here")
        if index == len(rows) or self.defect is Defect.EMIT_ON_RULE_10:
            return Change(RowKind.UPDATE_AFTER, rows[-1])
        return None


def maker(defect: Defect) -> Maker:
    def make(keys: Keys) -> Materializer:
        return MutantLegacy(keys, defect)

    return make


FAST = settings(max_examples=400, database=None, derandomize=True, deadline=None, phases=[Phase.generate])


def catalogue(make: Maker) -> None:
    """Every scenario; raises the first AssertionError after running them all."""
    failures = []
    for scenario in SCENARIOS:
        try:
            check_scenario(make, scenario)
        except AssertionError as error:
            failures.append(error)
    if failures:
        raise failures[0]


def differential(make: Maker) -> None:
    @FAST
    @given(any_streams())
    def run(stream: GeneratedStream) -> None:
        check_stream(make, stream)

    run()


def machine(make: Maker) -> None:
    run_state_machine_as_test(  # type: ignore[no-untyped-call, unused-ignore]
        MaterializerMachine.bound_to(make), settings=settings(FAST, max_examples=200, stateful_step_count=30)
    )


BREAKS: dict[Defect, tuple[set[int], int]] = {
    Defect.REMOVE_LAST_MATCH: ({6, 9, 10}, 6),  # rule 6; visible as a rollback's output
    Defect.DELETE_CARRIES_STORED: ({8}, 8),
    Defect.INSERT_ON_NON_EMPTY: ({5}, 5),
    Defect.EMIT_ON_RULE_10: ({10}, 10),
    Defect.MISSES_NOT_COUNTED: ({7}, 7),
    Defect.APPEND_WITH_UPSERT_KEY: ({4, 8, 9, 10}, 4),  # rule 4; visible when retracted
    Defect.CRASH_ON_ROLLBACK: ({9}, 9),  # a crash is a wrong output of the input it crashed on
}
"""Defect -> (the rules a failure may name, the rule the state machine names)."""

CHECKS: dict[str, Callable[[Maker], None]] = {
    "catalogue": catalogue,
    "differential": differential,
    "machine": machine,
}
MUTANTS = [defect for defect in Defect if defect is not Defect.NONE]


@pytest.mark.parametrize("check", CHECKS)
def test_unmutated_variant_passes(check: str) -> None:
    CHECKS[check](maker(Defect.NONE))


@pytest.mark.parametrize("check", CHECKS)
@pytest.mark.parametrize("defect", MUTANTS, ids=[defect.name.lower() for defect in MUTANTS])
def test_mutant_is_caught(defect: Defect, check: str) -> None:
    with pytest.raises(AssertionError) as caught:
        CHECKS[check](maker(defect))
    mismatch = find_mismatch(caught.value)
    assert mismatch is not None and mismatch.steps, caught.value
    allowed, by_machine = BREAKS[defect]
    rules = set(mismatch.diagnosis.rules)
    assert rules == {by_machine} if check == "machine" else rules and rules <= allowed, str(mismatch)
    assert str(mismatch).startswith(f"breaks rule {min(rules)}: ")
