"""The one rule for a missing prerequisite (tests/prerequisites.py): skipped locally, failed in CI."""

from __future__ import annotations

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
