"""``table.exec.sink.conflict-strategy`` selects the behaviour; a bad value is a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsertmat.cli import main
from upsertmat.errors import ExitCode
from upsertmat.impls import create
from upsertmat.impls.config import CONFLICT_STRATEGY, ConfigError, UnsupportedSetting, build_settings
from upsertmat.spec import ConflictBehavior, Keys


def test_deduplicate_is_the_default() -> None:
    assert build_settings([]).conflict is ConflictBehavior.DEDUPLICATE


@pytest.mark.parametrize("text", ["ERROR", "error", " Nothing "])
def test_the_key_is_case_insensitive(text: str) -> None:
    settings = build_settings([("--set", {CONFLICT_STRATEGY: text})])
    assert settings.conflict is ConflictBehavior(text.strip().upper())


def test_a_bad_value_names_the_choices() -> None:
    with pytest.raises(ConfigError, match=r"conflict-strategy.*DEDUPLICATE, ERROR, NOTHING"):
        build_settings([("--set", {CONFLICT_STRATEGY: "IGNORE"})])


def test_ttl_with_a_compacting_behaviour_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"op": "+I", "row": [1, 2]}\n', encoding="utf-8")
    argv = ["replay", "--pk", "0", "--ttl", "10", "--set", f"{CONFLICT_STRATEGY}=NOTHING", str(source)]
    assert main(argv) == ExitCode.USAGE
    with pytest.raises(UnsupportedSetting, match="bounded by the watermarks"):
        create(
            Keys(pk=(0,)),
            build_settings([("--set", {CONFLICT_STRATEGY: "ERROR", "table.exec.state.ttl": "5"})]),
        )
