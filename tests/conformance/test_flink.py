"""Apache Flink 2.3's real SinkUpsertMaterializer under the suite (``upsertmat[flink]``, tox -e flink).

Skipped unless PyFlink is installed. On both state backends (hashmap and rocksdb, the latter
checked in Flink's own log), LEGACY conforms and MAP with an upsert key does not (its linked list
breaks when a non-tail row is replaced in place: upstream FLINK-39740), which the suite finds on
its own.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyflink", reason="needs the flink extra: pip install 'upsertmat[flink]'")

pytestmark = pytest.mark.slow
ADAPTER = f"{shlex.quote(sys.executable)} -m upsertmat conformance-flink"


@pytest.fixture(autouse=True)
def dev_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-dev")


def run(
    pytester: pytest.Pytester, strategy: str, selection: str, backend: str = "hashmap"
) -> pytest.RunResult:
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", f"--upsertmat-cmd={ADAPTER} --strategy {strategy} --backend {backend}",
        "--upsertmat-scenarios-in-session", "-k", selection,
    )  # fmt: skip


def flink_logs() -> dict[Path, int]:
    """PyFlink's local log files (JobMaster and task logs of every local job) and their sizes."""
    import pyflink

    directory = Path(pyflink.__file__).parent / "log"
    return {path: path.stat().st_size for path in directory.glob("*.log")} if directory.is_dir() else {}


def logged_since(before: dict[Path, int]) -> str:
    """What PyFlink's log files gained since ``before`` (:func:`flink_logs`)."""
    text = ""
    for path in flink_logs():
        with path.open("rb") as handle:
            handle.seek(before.get(path, 0))
            text += handle.read().decode("utf-8", "replace")
    return text


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_legacy_conforms(pytester: pytest.Pytester, backend: str) -> None:
    before = flink_logs()
    result = run(pytester, "LEGACY", "pinned or scenario and not ttl", backend)
    outcomes = result.parseoutcomes()
    assert "failed" not in outcomes and outcomes["passed"] >= 30
    if backend == "rocksdb":  # the jobs really ran on RocksDB, not on a silently kept default
        assert "loads the state backend as EmbeddedRocksDBStateBackend" in logged_since(before)


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_map_with_an_upsert_key_is_caught(pytester: pytest.Pytester, backend: str) -> None:
    result = run(pytester, "MAP", "pinned", backend)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*--upsert-key 1*"])
