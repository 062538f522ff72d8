"""The model against the hand-written scenario catalogue, and the catalogue's own shape."""

from __future__ import annotations

from dataclasses import replace

import pytest

from upsertmat.conformance.checks import check_scenario
from upsertmat.conformance.scenarios import BY_NAME, SCENARIOS, Scenario
from upsertmat.spec import Keys, ModelMaterializer, RowKind, delete, update_after


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario.name for scenario in SCENARIOS])
def test_model_matches_catalogue(scenario: Scenario) -> None:
    check_scenario(ModelMaterializer, scenario)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario.name for scenario in SCENARIOS])
def test_expected_outputs_are_only_insert_update_after_delete(scenario: Scenario) -> None:
    kinds = {out.kind for out in scenario.expected if out is not None}
    assert kinds <= {RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.DELETE}


def test_catalogue_covers_the_required_cases() -> None:
    names = set(BY_NAME)
    assert {
        f"worked-example/{n}" for n in ("in-order", "update-before-overtaken", "update-after-first")
    } <= names
    for tag in ("no-upsert-key", "upsert-key"):
        orders = {name.rsplit("-", 1)[1] for name in names if name.startswith(f"three-rows/{tag}/")}
        assert orders == {"abc", "acb", "bac", "bca", "cab", "cba"}
    for name in (
        "duplicates/no-upsert-key",
        "retraction-before-insert",
        "retraction-of-never-added-row",
        "upsert-key/replace-non-last",
        "first-row-as-update-after",
    ):
        assert name in names


def test_worked_example_ends_with_b1_in_every_order() -> None:
    for name in ("worked-example/in-order", "worked-example/update-before-overtaken"):
        assert [o for o in BY_NAME[name].expected if o is not None][-1].row == (1, 20, "b1")
    assert BY_NAME["worked-example/update-after-first"].expected[-1] == update_after(1, 20, "b1")


def test_replace_non_last_delete_carries_incoming_values() -> None:
    scenario = BY_NAME["upsert-key/replace-non-last"]
    assert scenario.expected[-1] == delete(1, "x", 99, "zz")
    assert scenario.inputs[-1] == scenario.expected[-1]


@pytest.mark.parametrize("step", range(4))
def test_check_scenario_detects_a_wrong_expectation(step: int) -> None:
    scenario = BY_NAME["duplicates/first-copy-removed"]
    expected = list(scenario.expected)
    expected[step] = None if expected[step] is not None else update_after(1, "x", 10, "a")
    with pytest.raises(AssertionError, match=scenario.name):
        check_scenario(ModelMaterializer, replace(scenario, expected=tuple(expected)))


def test_check_scenario_detects_a_wrong_miss_count() -> None:
    scenario = BY_NAME["retraction-of-never-added-row"]
    with pytest.raises(AssertionError, match="retract_misses"):
        check_scenario(ModelMaterializer, replace(scenario, misses=scenario.misses - 1))


def test_scenario_needs_one_output_per_input() -> None:
    with pytest.raises(ValueError, match="2 inputs, 1 outputs"):
        Scenario("bad", Keys(pk=(0,)), (delete(1), delete(1)), (None,))
