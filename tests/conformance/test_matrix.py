"""``upsertmat conformance-matrix``: the page from two small rows, cells, links and reasons."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from upsertmat.conformance.tools import matrix
from upsertmat.conformance.tools import report as report_module

from ..prerequisites import requires

ROOT = Path(__file__).resolve().parents[2]


def report(tests: list[dict[str, str]], failing_rule: int | None = None) -> dict[str, Any]:
    """A conformance report's JSON with the given tests in one area."""
    rules: dict[str, dict[str, Any]] = {
        str(rule): {"text": "", "status": "FAIL" if rule == failing_rule else "pass", "failing_tests": []}
        for rule in range(1, 12)
    }
    if failing_rule is not None:
        rules[str(failing_rule)]["failing_tests"] = [t["name"] for t in tests if t["outcome"] == "failed"]
    return {
        "summary": {"passed": 1, "failed": 1, "skipped": 1},
        "rules": rules,
        "areas": {"a": {"tests": tests}},
    }


def test_cells_say_pass_fail_or_not_supported_with_numbered_reasons() -> None:
    refused = "the program refused --pk 0 --set "
    tests = [
        {"name": "test_scenario[one]", "outcome": "passed", "reason": ""},
        {"name": "test_pinned_streams", "outcome": "failed", "reason": ""},
        {
            "name": "test_ttl_streams[event_time-on_create]",
            "outcome": "skipped",
            "reason": f"{refused}table.exec.state.ttl=10: no TTL: --set table.exec.state.ttl=10",
        },
        {
            "name": "test_ttl_streams[processing_time-on_create]",
            "outcome": "skipped",
            "reason": f"{refused}upsertmat.state.ttl.update-type=on_create: no TTL",
        },
        {
            "name": "test_ttl_scenario[x]",
            "outcome": "skipped",
            "reason": "a per_key scenario; this is per_element",
        },
    ]
    reasons: list[str] = []
    cells = matrix.cells(report(tests, failing_rule=9), reasons)
    assert cells["rule-9"] == {"status": "FAIL", "test": "test_pinned_streams"}
    assert cells["rule-1"] == {"status": "pass"}
    assert cells["test_scenario"] == {"status": "pass"}
    assert cells["test_pinned_streams"] == {"status": "FAIL", "test": "test_pinned_streams"}
    assert cells["test_ttl_scenario"] == {"status": "n/s", "reasons": [1]}
    # one refusal, whatever the configuration: one reason
    assert cells["test_ttl_streams"] == {"status": "n/s", "reasons": [2]}
    assert reasons[1] == "the program exits with code 2 (not supported) on TTL settings: no TTL"
    assert cells["test_long_histories"] == {"status": "not run"}


def test_a_failing_cell_links_the_counterexample_in_the_rows_report(tmp_path: Path) -> None:
    tests = [{"name": "test_bare_update_streams", "outcome": "failed", "reason": ""}]
    (tmp_path / "LEGACY-heap.json").write_text(json.dumps(report(tests, failing_rule=4)), encoding="utf-8")
    rows = [row for row in matrix.rows() if row.name == "LEGACY-heap"]
    run = {"date": "2026-01-02", "seconds": 3, "keyword": None, "versions": {"upsertmat": "0.1.0"}}
    data = matrix.matrix_json(rows, tmp_path, {"LEGACY-heap": run}, "docs/conformance-reports")
    page = matrix.render(data, "conformance-reports")
    link = "[**FAIL**](conformance-reports/LEGACY-heap.md#test_bare_update_streams)"
    line = next(line for line in page.splitlines() if line.startswith("| LEGACY/heap |"))
    assert line.count(link) == 2  # rule 4 and the bare +U area
    assert "| 2026-01-02 | 3 s | upsertmat 0.1.0 |" in page


def test_the_rows_commands_read_the_same_wherever_the_page_is_written_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "elsewhere" / "docs"
    reports = docs / "conformance-reports"
    reports.mkdir(parents=True)
    monkeypatch.chdir(tmp_path)  # not the folder holding docs/
    matrix.write_page(docs, reports, [row for row in matrix.rows() if row.name == "LEGACY-heap"], {})
    data = json.loads((docs / matrix.DATA).read_text(encoding="utf-8"))
    assert data["rows"][0]["command"] == (
        "upsertmat conformance --name LEGACY-heap -o docs/conformance-reports --profile upsertmat-ci "
        "--impl LEGACY/heap"
    )


def test_the_committed_page_and_reports_are_what_their_json_renders() -> None:
    docs = ROOT / "docs"
    data = json.loads((docs / matrix.DATA).read_text(encoding="utf-8"))
    assert (docs / matrix.PAGE).read_text(encoding="utf-8") == matrix.render(data, "conformance-reports")
    reports = docs / "conformance-reports"
    for row in data["rows"]:
        if "cells" in row:
            report_data = json.loads((reports / f"{row['name']}.json").read_text(encoding="utf-8"))
            rendered = report_module.render_markdown(report_data, row["name"])
            assert (reports / f"{row['name']}.md").read_text(encoding="utf-8") == rendered, row["name"]


def test_findings_leave_out_when_and_where_a_row_ran(tmp_path: Path) -> None:
    tests = [{"name": "test_pinned_streams", "outcome": "failed", "reason": ""}]
    found = []
    for number, (date, workdir) in enumerate([("2026-01-02", "../.."), ("2027-03-04", "../../../x")]):
        docs = tmp_path / str(number)
        reports = docs / "conformance-reports"
        reports.mkdir(parents=True)
        data = {**report(tests, failing_rule=9), "workdir": workdir}
        (reports / "LEGACY-heap.json").write_text(json.dumps(data), encoding="utf-8")
        run = {"date": date, "seconds": 3 + number, "keyword": None, "versions": {"commit": f"c{number}"}}
        rows = [row for row in matrix.rows() if row.name == "LEGACY-heap"]
        page = matrix.matrix_json(rows, reports, {"LEGACY-heap": run}, "docs/conformance-reports")
        (docs / matrix.DATA).write_text(json.dumps(page), encoding="utf-8")
        found.append(matrix.findings(docs))
    assert found[0] == found[1]
    row = found[0]["rows"]["LEGACY-heap"]
    assert row["cells"]["rule-9"] == {"status": "FAIL", "test": "test_pinned_streams"}
    assert row["report"]["summary"] == {"passed": 1, "failed": 1, "skipped": 1}
    assert "run" not in row and "workdir" not in row["report"]


def test_differences_name_each_leaf_that_differs() -> None:
    before = {"rows": {"a": {"cells": {"rule-9": {"status": "pass"}}, "summary": [1, 2]}}, "reasons": ["x"]}
    after = {
        "rows": {"a": {"cells": {"rule-9": {"status": "FAIL"}}, "summary": [1, 3]}, "b": {}},
        "reasons": [],
    }
    assert matrix.differences(before, after) == [
        'rows.a.cells.rule-9.status: "pass" -> "FAIL"',
        "rows.a.summary[1]: 2 -> 3",
        "rows.b: only after",
        'reasons: ["x"] -> []',
    ]
    assert matrix.differences(before, json.loads(json.dumps(before))) == []


@pytest.mark.slow
@requires(shutil.which("javac") is not None, "a JDK's javac for the Java row (openjdk-17-jdk-headless)")
def test_the_command_regenerates_the_page_from_two_small_rows(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    done = subprocess.run(
        [sys.executable, "-m", "upsertmat", "conformance-matrix", "-o", str(docs),
         "--rows", "LEGACY-heap", "--rows", "java-example", "-k", "scenario or lifecycle"],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(docs / "conformance-matrix.md")
    data = json.loads((docs / "conformance-matrix.json").read_text(encoding="utf-8"))
    by_name = {row["name"]: row for row in data["rows"]}
    assert set(by_name) == {row.name for row in matrix.rows()}
    legacy, java = by_name["LEGACY-heap"], by_name["java-example"]
    assert legacy["summary"]["failed"] == java["summary"]["failed"] == 0
    assert legacy["cells"]["rule-7"]["status"] == "pass"
    assert java["cells"]["test_lifecycle_state_machine"]["status"] == "n/s"  # no {STATE} in its command
    assert java["cells"]["test_ttl_scenario"]["status"] == "n/s"  # it refuses --set
    assert java["run"]["versions"]["java"].startswith(("openjdk", "java"))
    assert "cells" not in by_name["MAP-heap"]  # not selected: not run
    page = (docs / "conformance-matrix.md").read_text(encoding="utf-8")
    assert "| LEGACY/heap | pass | pass |" in page
    assert "split runs need a {STATE} placeholder" in page
    assert (docs / "conformance-reports" / "java-example.md").is_file()
    assert "(`-k scenario or lifecycle`)" in page
    again = subprocess.run(
        [sys.executable, "-m", "upsertmat", "conformance-matrix", "-o", str(docs), "--no-run"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert again.returncode == 0 and again.stderr == ""
    rendered = (docs / "conformance-matrix.md").read_text(encoding="utf-8")
    assert rendered.replace(data["generated"], "") == page.replace(data["generated"], "")  # results kept


def test_a_crash_leaves_the_rules_undecided_not_passed() -> None:
    from upsertmat.conformance.tools.report import TestResult, rule_table

    crashed = TestResult("test_pinned_streams", "pinned streams", "failed", counterexample="exited with 70")
    table = rule_table([crashed, TestResult("test_scenario[a]", "scenarios", "passed")])
    assert {entry["status"] for entry in table.values()} == {"undecided"}
    assert table[9]["failing_tests"] == ["test_pinned_streams"]
    report_json = {
        "summary": {"passed": 1, "failed": 1, "skipped": 0},
        "rules": {str(rule): entry for rule, entry in table.items()},
        "areas": {"a": {"tests": [{"name": "test_pinned_streams", "outcome": "failed", "reason": ""}]}},
    }
    cell = matrix.cells(report_json, [])["rule-4"]
    assert cell == {"status": "?", "test": "test_pinned_streams"}
    row = {"name": "flink", "cells": {"rule-4": cell}}
    assert matrix._cell_text(row, "rule-4", "r") == "[**?**](r/flink.md#test_pinned_streams)"
