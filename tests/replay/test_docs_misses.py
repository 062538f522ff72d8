"""The miss-explanation example of docs/spec.md (rule 7) is what ``upsertmat replay`` prints."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "spec.md"


def blocks(text: str) -> list[str]:
    return re.findall(r"```\n(.*?)```", text, re.S)


def test_the_worked_example_of_rule_7_explanations_is_current(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("### Why a retraction matched nothing") :]
    inputs = blocks(section)[0]
    example = section[
        section.index("<!-- misses-example: begin -->") : section.index("<!-- misses-example: end -->")
    ]
    run, record = blocks(example)
    command, *expected = run.strip().splitlines()
    (tmp_path / "misses.jsonl").write_text(inputs, encoding="utf-8")
    words = shlex.split(command.removeprefix("$ "))
    assert words[0] == "upsertmat"
    done = subprocess.run(
        [sys.executable, "-m", "upsertmat", *words[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() + done.stderr.splitlines() == expected
    written = (tmp_path / "records.jsonl").read_text(encoding="utf-8").splitlines()
    assert written[0] == record.strip()
