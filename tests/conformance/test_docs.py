"""docs/conformance.md shows the worked example without TTL exactly as the file the tests run."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_minimal_implementation_in_the_docs_is_the_example_file() -> None:
    text = (ROOT / "docs" / "conformance.md").read_text(encoding="utf-8")
    block = text[
        text.index("<!-- list-materializer: begin -->") : text.index("<!-- list-materializer: end -->")
    ]
    code = block.split("```python\n", 1)[1].rsplit("```", 1)[0]
    assert code == (ROOT / "examples" / "python" / "list_materializer.py").read_text(encoding="utf-8")
