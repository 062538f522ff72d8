"""``table.exec.sink.conflict-strategy`` selects the behaviour; a bad value is a clear error."""

from __future__ import annotations

import pytest

from upsertmat.impls.config import CONFLICT_STRATEGY, ConfigError, build_settings
from upsertmat.spec import ConflictBehavior


def test_deduplicate_is_the_default() -> None:
    assert build_settings([]).conflict is ConflictBehavior.DEDUPLICATE


@pytest.mark.parametrize("text", ["ERROR", "error", " Nothing "])
def test_the_key_is_case_insensitive(text: str) -> None:
    settings = build_settings([("--set", {CONFLICT_STRATEGY: text})])
    assert settings.conflict is ConflictBehavior(text.strip().upper())


def test_a_bad_value_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"conflict-strategy.*DEDUPLICATE, ERROR, NOTHING"):
        build_settings([("--set", {CONFLICT_STRATEGY: "IGNORE"})])
