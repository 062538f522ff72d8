"""docs/spec.md section 9 embeds the generated DEDUPLICATE vs NOTHING/ERROR table verbatim."""

from __future__ import annotations

from pathlib import Path

from ..toolscripts import load

comparison_table = load("conflict_table").comparison_table

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def test_the_comparison_table_in_the_docs_is_current() -> None:
    assert comparison_table() in SPEC.read_text(encoding="utf-8"), (
        "regenerate: python tools/conflict_table.py, and paste it into docs/spec.md section 9"
    )
