"""``upsertmat conformance``: the report names the failing rule and the minimal counterexample."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from upsertmat.conformance.generators import KEYS_WITH_UPSERT_KEY, KEYS_WITHOUT_UPSERT_KEY, Step
from upsertmat.conformance.mismatch import Mismatch
from upsertmat.conformance.report import anchor, rules_exercised
from upsertmat.spec import Keys, delete, insert, update_after

BROKEN = '''
from upsertmat.impls import create_named
from upsertmat.spec import Change, RowKind


class LastRetractionDeletes:
    """LEGACY, except that a retraction of the last of several rows emits -D (rule 9 broken)."""

    def __init__(self, keys):
        self.inner = create_named("LEGACY/heap", keys)

    @property
    def retract_misses(self):
        return self.inner.retract_misses

    def process(self, change):
        out = self.inner.process(change)
        if out is not None and out.kind is RowKind.UPDATE_AFTER and not change.kind.is_add:
            return Change(RowKind.DELETE, out.row)
        return out

    def advance_time(self, now):
        self.inner.advance_time(now)

    def close(self):
        self.inner.close()


def factory(keys, settings):
    return LastRetractionDeletes(keys)
'''


def mismatch(keys: Keys, *steps: Step, ops: tuple[str, ...] = ("+U",)) -> Mismatch:
    return Mismatch("m", keys=keys, steps=steps, actual_ops=ops)


def test_the_rule_deciding_the_failing_input() -> None:
    a, b = insert(1, "u1", 10, "a"), insert(1, "u2", 20, "b")
    assert rules_exercised(mismatch(KEYS_WITHOUT_UPSERT_KEY, a)) == [5]
    assert rules_exercised(mismatch(KEYS_WITH_UPSERT_KEY, a, b, update_after(1, "u1", 11, "a2"))) == [4]
    assert rules_exercised(mismatch(KEYS_WITH_UPSERT_KEY, a, b, delete(1, "u2", 20, "b"))) == [9]
    assert rules_exercised(mismatch(KEYS_WITH_UPSERT_KEY, a, b, delete(1, "u1", 10, "a"))) == [10]
    assert rules_exercised(mismatch(KEYS_WITH_UPSERT_KEY, a, delete(1, "u1", 0, None))) == [8]
    assert rules_exercised(mismatch(KEYS_WITH_UPSERT_KEY, delete(1, "u1", 0, None), ops=("-D",))) == [7]
    assert rules_exercised(mismatch(KEYS_WITHOUT_UPSERT_KEY, a, b, ops=("+U", "+U"))) == [5, 11]
    assert rules_exercised(Mismatch("misses", keys=KEYS_WITHOUT_UPSERT_KEY, steps=())) == [7]


def run_report(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "upsertmat.cli", "conformance", *arguments, "-o", str(tmp_path / "out")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_report_of_a_conforming_implementation(tmp_path: Path) -> None:
    done = run_report(tmp_path, "--impl", "VALUE/heap", "--profile", "upsertmat-dev")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tmp_path / "out" / "VALUE-heap.md")
    data = json.loads((tmp_path / "out" / "VALUE-heap.json").read_text())
    assert data["summary"]["failed"] == 0 and data["summary"]["passed"] > 40
    assert {row["status"] for row in data["rules"].values()} == {"pass"}
    page = (tmp_path / "out" / "VALUE-heap.md").read_text()
    assert "| 9 | RETRACT of the last element emits `+U` of the new last | pass |" in page
    assert "Minimal counterexamples" not in page


def test_report_names_the_broken_rule_with_a_counterexample(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text(BROKEN, encoding="utf-8")
    done = run_report(
        tmp_path, "--impl", "broken:factory", "--name", "broken", "--profile", "upsertmat-dev",
        "-k", "scenario and not ttl or valid_streams",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    data = json.loads((tmp_path / "out" / "broken.json").read_text())
    statuses = {int(rule): row["status"] for rule, row in data["rules"].items()}
    assert statuses[9] == "FAIL"
    assert {rule for rule, status in statuses.items() if status == "FAIL"} == {9}
    page = (tmp_path / "out" / "broken.md").read_text()
    assert "## Minimal counterexamples" in page
    assert "fed (the failing input last):" in page and "(rules 9)" in page
    assert "-k 'scenario and not ttl or valid_streams'" in page
    # each failure's input is written next to the page, with the command that replays it by hand
    failing = [t for area in data["areas"].values() for t in area["tests"] if t["outcome"] == "failed"]
    for test in failing:
        name = f"broken.{anchor(test['name'])}.jsonl"
        assert f'<a id="{anchor(test["name"])}"></a>' in page and f"]({name})" in page
        command = shlex.split(next(line for line in page.splitlines() if line.endswith(f" {name}")))
        assert command[:5] == ["python", "-m", "upsertmat.conformance.reproduce", "--impl", "broken:factory"]
        again = subprocess.run(
            [sys.executable, *command[1:-1], str(tmp_path / "out" / name)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert again.returncode == 1, again.stderr  # the difference, reproduced
        assert "the model emits [+U" in again.stdout and "the implementation [-D" in again.stdout


@pytest.mark.parametrize("arguments", [["--impl", "NOPE/heap"], []])
def test_usage_errors(tmp_path: Path, arguments: list[str]) -> None:
    done = run_report(tmp_path, *arguments)
    assert done.returncode in (2, 4), done.stderr  # pytest's usage error, or argparse's
