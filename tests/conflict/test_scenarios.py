"""The model agrees with the hand-written ON CONFLICT scenario catalogue."""

from __future__ import annotations

import pytest

from upsertmat.conformance.conflict.checks import drive
from upsertmat.conformance.conflict.scenarios import CONFLICT_SCENARIOS, ConflictScenario
from upsertmat.spec import ConflictBehavior, ConflictModel


@pytest.mark.parametrize("behavior", [ConflictBehavior.NOTHING, ConflictBehavior.ERROR])
@pytest.mark.parametrize("scenario", CONFLICT_SCENARIOS, ids=lambda scenario: scenario.name)
def test_the_model_matches_the_catalogue(scenario: ConflictScenario, behavior: ConflictBehavior) -> None:
    model = ConflictModel(scenario.keys, behavior)
    emitted, failed_at = drive(model, scenario.lines)
    expected, error_at = scenario.expected(behavior)
    assert (emitted, failed_at) == (list(expected), error_at)
    if failed_at is None:
        assert model.retract_misses == scenario.misses
