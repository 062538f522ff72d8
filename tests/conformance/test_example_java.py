"""The worked example of docs/conformance.md: an engine in Java passes the suite through the protocol.

``examples/java/UpsertMaterializer.java`` is one file with no dependencies. It is run as the
docs show (``java UpsertMaterializer.java``) on the sample changelog, then compiled once with
``javac`` so the whole suite does not pay the in-memory compilation at every process start.
Needs a JDK 17+ (a JRE lacks the compiler); skipped with a reason without one.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from upsertmat.conformance.scenarios import SCENARIOS, TTL_SCENARIOS
from upsertmat.conformance.suite import TTL_CONFIGS
from upsertmat.spec import Granularity

from ..prerequisites import requires

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "examples" / "java" / "UpsertMaterializer.java"
SUITE_TESTS = len(SCENARIOS) + len(TTL_SCENARIOS) + len(TTL_CONFIGS) + 8
PER_KEY_TTL = sum(s.granularity is Granularity.PER_KEY for s in TTL_SCENARIOS)

pytestmark = requires(
    shutil.which("java") is not None and shutil.which("javac") is not None,
    "a JDK 17+ for the Java example (java and javac on PATH; Debian's openjdk-17-jdk-headless)",
)


def test_the_documented_command_reproduces_the_sample() -> None:
    sample = ROOT / "examples" / "out-of-order.jsonl"
    for flags, expected in (
        (["--pk", "0"], "out-of-order.expected.jsonl"),
        (["--pk", "0", "--upsert-key", "1"], "out-of-order.upsert-key.expected.jsonl"),
    ):
        done = subprocess.run(
            ["java", str(SOURCE), *flags],
            stdin=sample.open("rb"),
            capture_output=True,
            timeout=120,
            check=True,
        )
        assert done.stdout.decode() == (ROOT / "examples" / expected).read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_java_engine_passes_the_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-ci")
    classes = pytester.path / "classes"
    subprocess.run(["javac", "-d", str(classes), str(SOURCE)], check=True, timeout=300)
    command = f"java -cp {classes} UpsertMaterializer"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs", f"--upsertmat-cmd={command}")
    # skipped: everything with TTL (the program refuses --set), the split runs (no {STATE}),
    # the two step-by-step state machines
    skipped = len(TTL_SCENARIOS) - PER_KEY_TTL + len(TTL_CONFIGS) + 1 + 2 + PER_KEY_TTL
    result.assert_outcomes(passed=SUITE_TESTS - skipped, skipped=skipped)
    result.stdout.fnmatch_lines(["*the program refused --pk 0 --set table.exec.state.ttl=*no TTL*"])
