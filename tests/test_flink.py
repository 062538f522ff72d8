"""Apache Flink 2.3's real SinkUpsertMaterializer under the suite (``upsertmat[flink]``, tox -e flink).

Skipped unless PyFlink is installed. LEGACY conforms; MAP with an upsert key does not (its
linked list breaks when a non-tail row is replaced in place: upstream FLINK-39740), and the
suite finds that on its own.
"""

from __future__ import annotations

import shlex
import sys

import pytest

pytest.importorskip("pyflink", reason="needs the flink extra: pip install 'upsertmat[flink]'")

pytestmark = pytest.mark.slow
ADAPTER = f"{shlex.quote(sys.executable)} -m upsertmat.conformance.flink"


@pytest.fixture(autouse=True)
def dev_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-dev")


def run(pytester: pytest.Pytester, strategy: str, selection: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--upsertmat-cmd={ADAPTER} --strategy {strategy}",
        "--upsertmat-scenarios-in-session", "-k", selection,
    )  # fmt: skip


def test_flink_legacy_conforms(pytester: pytest.Pytester) -> None:
    result = run(pytester, "LEGACY", "pinned or scenario and not ttl")
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and outcomes["passed"] >= 30


def test_flink_map_with_an_upsert_key_is_caught(pytester: pytest.Pytester) -> None:
    result = run(pytester, "MAP", "pinned")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*--upsert-key 1*"])
