"""The result modes' renderers: tableau lines are exact."""

from __future__ import annotations

import io
import json
from pathlib import Path

from upsertmat.client.render import Tableau
from upsertmat.client.results import ResultChange
from upsertmat.sinks import Column

COLUMNS = (Column("id", "bigint"), Column("v", "string"), Column("x", "double"))


def test_tableau_lines_are_exact(tmp_path: Path) -> None:
    for format, expected in (
        ("text", 'batch 3: +U [1, 1.0, true, null, "x"]\n'),
        ("jsonl", json.dumps({"batch": 3, "pos": 7, "op": "+U", "row": [1, 1.0, True, None, "x"]}) + "\n"),
    ):
        stream = io.StringIO()
        Tableau(stream, format).add_changes([ResultChange(7, 3, "+U", (1, 1.0, True, None, "x"))], 0.0)
        assert stream.getvalue() == expected
