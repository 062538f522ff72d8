"""The one rule for a missing prerequisite (tests/prerequisites.py): skipped locally, failed in CI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SUITE = f"""
import sys

sys.path.insert(0, {str(ROOT)!r})
import pytest
from tests.prerequisites import require, require_module, requires


def test_inside() -> None:
    require(False, "a thing only CI has")


def test_import() -> None:
    require_module("no_such_module_here", "a package")


@requires(False, "a device")
def test_marked() -> None:
    pass


@requires(True, "a device that is there")
def test_present() -> None:
    require(True, "a binary that is there")
    assert require_module("json", "the standard library").dumps(1) == "1"
"""

CONFTEST = f"""
import sys

sys.path.insert(0, {str(ROOT)!r})
from tests.prerequisites import MARKER_HELP, check_marks


def pytest_configure(config):
    config.addinivalue_line("markers", MARKER_HELP)


def pytest_runtest_setup(item):
    check_marks(item)
"""


@pytest.mark.parametrize("ci", [None, "", "0", "false", "true", "1"])
def test_a_missing_prerequisite_skips_locally_and_fails_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_needs=SUITE)
    result = pytester.runpytest("-p", "no:cacheprovider", "--strict-markers", "-rsf")
    lines = "\n".join(result.outlines)
    in_ci = ci not in (None, "", "0", "false")
    if in_ci:  # a marker fails the test at set-up: an error
        result.assert_outcomes(passed=1, failed=2, errors=1)
        assert lines.count("(CI provides every prerequisite: .ci/run)") >= 3, lines
    else:
        result.assert_outcomes(passed=1, skipped=3)
    for what in ("a thing only CI has", "a package (No module named 'no_such_module_here')", "a device"):
        assert f"missing prerequisite: {what}" in lines, lines
    assert "During handling" not in lines


NOT_PREREQUISITES = {
    "tests/test_build.py": "skipif: the build expected is tox's setting (UPSERTMAT_EXPECT_BUILD)",
    "tests/state/test_lmdb.py": "skipif: a compiled function cannot be patched; the pure build runs it",
}
"""The skips of the suite that are no missing prerequisite (each says why): a build or a setting
the run chose, which CI runs both ways (tox), so nothing is hidden by skipping there."""
ESCAPES = re.compile(
    r"""importorskip\(|pytest\.skip\(|mark\.skipif\(|environ\.get\(["']CI["']\)|environ\[["']CI["']\]"""
)


def test_every_skip_for_a_missing_prerequisite_follows_the_rule() -> None:
    """Issue 45: tests/conformance/test_flink.py (through tests/flinkextra.py), the sinks' tests
    (``pytest.importorskip``), tests/conformance/test_matrix.py (``skipif`` on ``javac``) and
    the Spark and gateway helpers (their own ``CI`` check, which took ``CI=false`` for CI)
    skipped outside :func:`tests.prerequisites.require`, so ``CI=true`` did not fail them all.
    No test file skips on its own now; the rule's module is the one that does."""
    tests = ROOT / "tests"
    own = {tests / "prerequisites.py", Path(__file__).resolve()}
    found = sorted(
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in tests.rglob("*.py")
        if path not in own and str(path.relative_to(ROOT)) not in NOT_PREREQUISITES
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if ESCAPES.search(line)
    )
    assert found == []
    for path in NOT_PREREQUISITES:
        assert "skipif(" in (ROOT / path).read_text(encoding="utf-8"), path  # still there, still decided
