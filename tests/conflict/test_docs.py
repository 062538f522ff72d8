"""docs/spec.md section 9 embeds the generated DEDUPLICATE vs NOTHING/ERROR table verbatim."""

from __future__ import annotations

from pathlib import Path

from upsertmat.conformance.conflict_table import comparison_table

SPEC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def test_the_comparison_table_in_the_docs_is_current() -> None:
    assert comparison_table() in SPEC.read_text(encoding="utf-8"), (
        "regenerate: python -m upsertmat.conformance.conflict_table, and paste it into docs/spec.md section 9"
    )
