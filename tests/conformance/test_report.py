"""``upsertmat conformance``: the report names the failing rule and the minimal counterexample."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from upsertmat.conformance.checks import check_timed_stream
from upsertmat.conformance.generators import KEYS_WITH_UPSERT_KEY, KEYS_WITHOUT_UPSERT_KEY, Advance, Step
from upsertmat.conformance.mismatch import RULES, Differs, Mismatch, rules_broken
from upsertmat.conformance.pinned import ttl_probe
from upsertmat.conformance.suite import TTL_CONFIGS
from upsertmat.conformance.tools.report import _counterexample, anchor, refreshed
from upsertmat.spec import Granularity, Keys, ModelMaterializer, TtlSettings, delete, insert, update_after

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
    assert rules_broken(mismatch(KEYS_WITHOUT_UPSERT_KEY, a)) == (5,)
    # a replacement in place (rule 4) emits by rule 5 like any ADD
    assert rules_broken(mismatch(KEYS_WITH_UPSERT_KEY, a, b, update_after(1, "u1", 11, "a2"))) == (5,)
    assert rules_broken(mismatch(KEYS_WITH_UPSERT_KEY, a, b, delete(1, "u2", 20, "b"))) == (9,)
    assert rules_broken(mismatch(KEYS_WITH_UPSERT_KEY, a, b, delete(1, "u1", 10, "a"))) == (10,)
    assert rules_broken(mismatch(KEYS_WITH_UPSERT_KEY, a, delete(1, "u1", 0, None))) == (8,)
    assert rules_broken(mismatch(KEYS_WITH_UPSERT_KEY, delete(1, "u1", 0, None), ops=("-D",))) == (7,)
    assert rules_broken(mismatch(KEYS_WITHOUT_UPSERT_KEY, a, b, ops=("+U", "+U"))) == (5, 11)
    # only the miss count differed; the stored rows differed (the outputs agreeing)
    assert rules_broken(
        Mismatch("misses", keys=KEYS_WITHOUT_UPSERT_KEY, steps=(a,), differs=Differs.MISSES)
    ) == (7,)
    assert rules_broken(Mismatch("s", keys=KEYS_WITH_UPSERT_KEY, steps=(a, a), differs=Differs.STATE)) == (4,)
    assert rules_broken(
        Mismatch("s", keys=KEYS_WITHOUT_UPSERT_KEY, steps=(a, b, a), differs=Differs.STATE)
    ) == (3,)
    assert rules_broken(
        Mismatch("s", keys=KEYS_WITHOUT_UPSERT_KEY, steps=(a, a, b, delete(*a.row)), differs=Differs.STATE)
    ) == (6,)
    # a crash counts as a wrong output of the input it crashed on; the message names the rule
    crash = Mismatch(
        "boom",
        keys=KEYS_WITH_UPSERT_KEY,
        steps=(a, b, delete(1, "u2", 20, "b")),
        actual=(),
        differs=Differs.CRASH,
    )
    assert crash.diagnosis.rules == (9,)
    assert str(crash).splitlines() == [f"breaks rule 9: {RULES[9]} (docs/spec.md)", "boom"]


def test_a_failure_without_a_mismatch_shows_hypothesis_example_and_blob() -> None:
    """A crash the checks do not wrap (here a bare error) still shows the example Hypothesis
    found and the blob that replays it, and decides no rule."""
    error = RuntimeError("export failed")
    example = "Failing test case: property_(value=GeneratedStream(keys=..., arrival=(+I[1, 'a'],)))"
    blob = "You can reproduce this test case by temporarily adding @reproduce_failure('6.1', b'AXic')"
    for note in (example, "Explanation:", blob):
        error.add_note(note)
    text, mismatch = _counterexample(error)
    assert mismatch is None
    assert text.splitlines() == ["export failed", example, blob]


@pytest.mark.parametrize("granularity", list(Granularity))
@pytest.mark.parametrize("ttl", TTL_CONFIGS, ids=str)
def test_the_ttl_probe_catches_an_implementation_that_ignores_ttl(
    ttl: TtlSettings, granularity: Granularity
) -> None:
    """The probe fed before the TTL streams and machines tells TTL from none in every
    configuration, and the failure of an implementation without TTL says so, with the hint."""
    probe = ttl_probe(ttl)
    with pytest.raises(Mismatch) as caught:
        check_timed_stream(lambda keys: ModelMaterializer(keys), probe, ttl, granularity)
    assert caught.value.diagnosis.ttl_ignored and caught.value.diagnosis.rules == ()
    message = str(caught.value)
    assert message.startswith("breaks TTL (docs/ttl.md)") and "upsertmat.spec.Unsupported" in message
    check_timed_stream(lambda keys: ModelMaterializer(keys, ttl, granularity), probe, ttl, granularity)


def test_a_ttl_failure_whose_output_expiry_decides_is_not_a_rule_failure() -> None:
    """Under TTL, an output that differs from both models (with and without TTL) breaks TTL: the
    implementation's rules 1-11 are judged on the untimed tests."""
    ttl = TTL_CONFIGS[0]
    steps = (
        insert(1, "u1", 10, "a", ts=0),
        Advance(10),
        insert(1, "u2", 10, "b", ts=10),
        delete(1, "u2", 10, "b", ts=10),
    )
    # TTL: a expired, b alone: -D b (rule 8). No TTL: +U a (rule 9). Emitted: -D a, neither.
    expected = (delete(1, "u2", 10, "b"),)
    keys = KEYS_WITHOUT_UPSERT_KEY
    wrong = Mismatch(
        "m", keys=keys, steps=steps, actual=(delete(1, "u1", 10, "a"),), expected=expected, ttl=ttl
    )
    assert wrong.diagnosis.rules == () and not wrong.diagnosis.ttl_ignored
    assert wrong.verdict.startswith("breaks TTL (docs/ttl.md): under TTL (ttl_ms=5, processing_time")
    untimed = Mismatch(
        "m", keys=keys, steps=steps, actual=(update_after(1, "u1", 10, "a"),), expected=expected, ttl=ttl
    )
    assert untimed.diagnosis.ttl_ignored


def run_report(tmp_path: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "upsertmat", "conformance", *arguments, "-o", str(tmp_path / "out")],
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


KEYWORD = "scenario or state_machine or ttl_streams and processing_time and not write"
"""The hand-written catalogues, the state machines, one TTL stream test."""


def test_report_of_a_planted_rule_9_bug(tmp_path: Path) -> None:
    """BROKEN breaks rule 9 and ignores TTL without declaring it. The report decides every rule
    (9 FAIL; 2, 3, 4 and 6 not isolated, as nothing compared the stored rows; every other one
    pass: no failure is left undecided, the state machine's included),
    shows every input fed and the state machine's steps, says the TTL failures look like no TTL
    at all and suggests ``Unsupported``; the commands it gives work where it says."""
    (tmp_path / "broken.py").write_text(BROKEN, encoding="utf-8")
    # derandomized: the state machine meets the bug on every run
    done = run_report(
        tmp_path, "--impl", "broken:factory", "--name", "broken", "--profile", "upsertmat-ci", "-k", KEYWORD
    )
    assert done.returncode == 1, done.stderr
    out = tmp_path / "out"
    data = json.loads((out / "broken.json").read_text())
    statuses = {int(rule): row["status"] for rule, row in data["rules"].items()}
    # BROKEN offers no HistoryAccess: its failures are seen in outputs only, so a wrong match or
    # placement (rules 2, 3, 4, 6) could have caused them as well
    assert statuses == {
        rule: "FAIL" if rule == 9 else "not isolated" if rule in (2, 3, 4, 6) else "pass"
        for rule in range(1, 12)
    }
    tests = {t["name"]: t for area in data["areas"].values() for t in area["tests"]}
    machine = tests["test_state_machine"]
    assert machine["outcome"] == "failed" and machine["rules"] == [9], machine
    assert "fed (every input, the failing one last):\n  [0] +I[" in machine["counterexample"]
    assert "the state machine's steps, as Hypothesis prints them:\n  state = " in machine["counterexample"]
    assert "state.misses_agree()" not in machine["counterexample"]  # invariant checks left out
    timed = [t for name, t in tests.items() if "ttl" in name and t["outcome"] == "failed"]
    assert {t["name"] for t in timed} >= {
        "test_ttl_state_machine",
        "test_ttl_streams[processing_time-on_create]",
    }
    # each breaks rule 9 (a rollback in a TTL scenario) or TTL (expiry decides its output)
    assert all(t["rules"] == [9] or t["breaks"].startswith("TTL (docs/ttl.md)") for t in timed), timed
    assert (
        tests["test_ttl_state_machine"]["ttl_ignored"]
        and tests["test_ttl_streams[processing_time-on_create]"]["ttl_ignored"]
    )
    page = (out / "broken.md").read_text()
    assert (
        "**TTL:**" in page
        and "raise upsertmat.spec.Unsupported from the factory when settings.ttl.enabled" in page
    )
    assert "## Minimal counterexamples" in page and "(rule 9; not isolated from rules 2, 3, 4, 6)" in page
    assert "-k 'scenario or state_machine" in page
    # every failure's input is next to the page, with the command that replays it in the page's
    # directory (the implementation is imported from where the suite ran: --workdir ..)
    for test in tests.values():
        if test["outcome"] == "failed":
            name = f"broken.{anchor(test['name'])}.jsonl"
            assert (
                f'<a id="{anchor(test["name"])}"></a>' in page
                and f"]({name})" in page
                and (out / name).is_file()
            )
    for test, expected in [
        ("test_state_machine", "the model emits [+U"),
        ("test_ttl_streams[processing_time-on_create]", "the model emits nothing, the implementation [-D"),
    ]:
        name = f"broken.{anchor(test)}.jsonl"
        command = shlex.split(next(line for line in page.splitlines() if line.endswith(f" {name}")))
        assert command[:6] == [
            "upsertmat",
            "conformance-reproduce",
            "--workdir",
            "..",
            "--impl",
            "broken:factory",
        ]
        again = subprocess.run(
            [sys.executable, "-m", *command],
            cwd=out,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert again.returncode == 1, again.stderr  # the difference, reproduced
        assert expected in again.stdout, again.stdout
    # the printed node id runs that test under pytest, from where the report ran
    hint = next(line for line in done.stderr.splitlines() if "to rerun a failed test under pytest" in line)
    rerun = shlex.split(hint.split("from this directory: ", 1)[1])
    assert rerun[:3] == ["pytest", "--upsertmat-impl=broken:factory", "--hypothesis-profile=upsertmat-ci"]
    pytest_again = subprocess.run(
        [sys.executable, "-m", *rerun, "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert pytest_again.returncode == 1 and "1 failed" in pytest_again.stdout, pytest_again.stdout


@pytest.mark.parametrize("arguments", [["--impl", "NOPE/heap"], []])
def test_usage_errors(tmp_path: Path, arguments: list[str]) -> None:
    done = run_report(tmp_path, *arguments)
    assert done.returncode in (2, 4), done.stderr  # pytest's usage error, or argparse's


REMOVES_LAST_MATCH = f"""
import sys

sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from tests.conformance.test_mutants import Defect, MutantLegacy


def factory(keys, settings):
    return MutantLegacy(keys, Defect.REMOVE_LAST_MATCH)
"""
"""The mutant whose retraction removes the last match instead of the first (rule 6 broken)."""


def test_report_of_a_wrong_removal_does_not_say_rule_6_passes(tmp_path: Path) -> None:
    """The outputs show the wrong removal as rule 10 (a non-last element removed, nothing
    expected; the mutant removed the last and emitted +U): rule 6 is not isolated, never pass,
    and each failure's heading names both candidates."""
    (tmp_path / "mutant.py").write_text(REMOVES_LAST_MATCH, encoding="utf-8")
    done = run_report(
        tmp_path,
        "--impl",
        "mutant:factory",
        "--name",
        "mutant",
        "--profile",
        "upsertmat-dev",
        "-k",
        "scenario",
    )
    assert done.returncode == 1, done.stderr
    data = json.loads((tmp_path / "out" / "mutant.json").read_text())
    statuses = {int(rule): row["status"] for rule, row in data["rules"].items()}
    assert statuses == {
        rule: "FAIL" if rule == 10 else "not isolated" if rule in (2, 3, 4, 6) else "pass"
        for rule in range(1, 12)
    }
    failed = sorted(
        t["name"] for area in data["areas"].values() for t in area["tests"] if t["outcome"] == "failed"
    )
    untimed = [name for name in failed if not name.startswith("test_ttl")]
    assert untimed == [
        "test_scenario[duplicates/first-copy-removed]",
        "test_scenario[duplicates/no-upsert-key]",
    ]
    assert data["rules"]["6"]["failing_tests"] == data["rules"]["10"]["failing_tests"]
    assert sorted(data["rules"]["6"]["failing_tests"]) == untimed
    page = (tmp_path / "out" / "mutant.md").read_text()
    assert "| 6 | RETRACT removes the first match in insertion order | not isolated: 2 test(s), " in page
    heading = "### test_scenario[duplicates/first-copy-removed] (rule 10; not isolated from rules 2, 3, 4, 6)"
    assert heading in page


def failed_test(rules: list[int], differs: str | None) -> dict[str, object]:
    test: dict[str, object] = {"name": "t", "area": "a", "outcome": "failed", "rules": rules}
    if differs is not None:
        test["differs"] = differs
    return test


@pytest.mark.parametrize(
    ("rules", "differs", "hidden"),
    [
        ([10], "output", {2, 3, 4, 6}),
        ([9], "crash", {2, 3, 4, 6}),
        ([6], "state", set()),  # the state machine compared the stored rows: rule 6 itself
        ([4], "state", set()),
        ([7], "misses", set()),
        ([11], "output", set()),  # two outputs for one input: no stored row makes that
        ([5, 11], "output", {2, 3, 4, 6}),
        ([10], None, {2, 3, 4, 6}),  # a report written before "differs": read as an output
    ],
)
def test_rules_a_failure_cannot_be_told_apart_from(
    rules: list[int], differs: str | None, hidden: set[int]
) -> None:
    data = {"areas": {"a": {"status": "FAIL", "tests": [failed_test(rules, differs)]}}}
    statuses = {rule: row["status"] for rule, row in refreshed(data)["rules"].items()}
    assert statuses == {
        rule: "FAIL" if rule in rules else "not isolated" if rule in hidden else "pass"
        for rule in range(1, 12)
    }
