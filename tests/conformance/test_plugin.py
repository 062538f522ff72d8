"""The pytest plugin, end to end in fresh pytest processes (``pytester``).

Each run happens in an empty temporary directory, as for a third party who only installed
upsertmat: ``pytest --upsertmat-impl=NAME`` must collect and run the whole suite there.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from upsertmat.conformance.mismatch import RULES
from upsertmat.conformance.scenarios import SCENARIOS, TTL_SCENARIOS
from upsertmat.conformance.suite import TTL_CONFIGS
from upsertmat.spec.ttl import Granularity

# pinned, valid, bare, tolerated, long, state machine, lifecycle machine, TTL machine
SINGLE_TESTS = 8
SUITE_TESTS = len(SCENARIOS) + len(TTL_SCENARIOS) + len(TTL_CONFIGS) + SINGLE_TESTS
# LEGACY keeps per-key TTL: the per-element TTL scenarios are skipped for it (and vice versa).
LEGACY_SKIPS = sum(scenario.granularity is Granularity.PER_ELEMENT for scenario in TTL_SCENARIOS)

BROKEN_IMPL = '''
from upsertmat.impls import create_named
from upsertmat.spec import Change, RowKind


class AlwaysInsert:
    """LEGACY, except that every ADD is emitted as +I (rule 5 broken)."""

    def __init__(self, keys):
        self.inner = create_named("LEGACY/heap", keys)

    @property
    def retract_misses(self):
        return self.inner.retract_misses

    def process(self, change):
        out = self.inner.process(change)
        if out is not None and out.kind is RowKind.UPDATE_AFTER and change.kind.is_add:
            return Change(RowKind.INSERT, out.row)
        return out

    def advance_time(self, now):
        self.inner.advance_time(now)

    def close(self):
        self.inner.close()


def factory(keys, settings):
    return AlwaysInsert(keys)
'''


@pytest.fixture
def dev_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-dev")
    monkeypatch.delenv("UPSERTMAT_EXAMPLES_SCALE", raising=False)


@pytest.mark.usefixtures("dev_profile")
def test_suite_passes_for_legacy_heap_in_an_empty_directory(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--upsertmat-impl=LEGACY/heap", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=SUITE_TESTS - LEGACY_SKIPS, skipped=LEGACY_SKIPS)
    result.stdout.fnmatch_lines(["*profile 'upsertmat-dev'*", "*conformance suite against LEGACY/heap*"])


@pytest.mark.usefixtures("dev_profile")
def test_suite_accepts_an_alias(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        "--upsertmat-impl=legacy-list", "-p", "no:cacheprovider", "-k", "scenario"
    )
    scenarios = len(SCENARIOS) + len(TTL_SCENARIOS)  # "-k scenario" selects both catalogues
    result.assert_outcomes(
        passed=scenarios - LEGACY_SKIPS, skipped=LEGACY_SKIPS, deselected=SUITE_TESTS - scenarios
    )


@pytest.mark.usefixtures("dev_profile")
def test_suite_fails_for_a_broken_third_party_factory(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(broken_impl=BROKEN_IMPL)
    # the scenarios, one Hypothesis test (each failing Hypothesis test costs a shrink) and the TTL
    # streams, which this factory accepts and ignores: they fail on the TTL probe, without shrinking
    result = pytester.runpytest_subprocess(
        "--upsertmat-impl=broken_impl:factory",
        "-p",
        "no:cacheprovider",
        "-k",
        "scenario or valid_streams or ttl_streams",
    )
    outcomes = result.parseoutcomes()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    # every scenario with an ADD into a non-empty key fails, and the Hypothesis tests
    assert outcomes["failed"] >= 20 + len(TTL_CONFIGS)
    result.stdout.fnmatch_lines(["*expected +U*got +I*"])
    result.stdout.fnmatch_lines(["FAILED *test_valid_streams*"])
    # each failure names the rule it breaks, first
    result.stdout.fnmatch_lines([f"E * breaks rule 5: {RULES[5]} (docs/spec.md)"])
    # the TTL failures say the implementation behaves as if it had no TTL, and what to do
    under = "under TTL (ttl_ms=5, event_time, on_create) the implementation emits what the model emits*"
    result.stdout.fnmatch_lines([f"E * breaks TTL (docs/ttl.md): {under}*"])
    hint = "raise upsertmat.spec.Unsupported from the factory when settings.ttl.enabled"
    result.stdout.fnmatch_lines(
        [f"upsertmat: * TTL test(s) failed as if the implementation had no TTL: *{hint}*"]
    )


@pytest.mark.usefixtures("dev_profile")
def test_a_failing_tests_printed_id_runs_that_test_alone(pytester: pytest.Pytester) -> None:
    # run in a subdirectory of a project: pytest's rootdir (the project) is not where it runs
    pytester.makeini("[pytest]\n")
    pytester.mkdir("sub").joinpath("broken_impl.py").write_text(BROKEN_IMPL, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(pytester.path / "sub")
        first = pytester.runpytest_subprocess(
            "--upsertmat-impl=broken_impl:factory", "-p", "no:cacheprovider", "-k", "pinned", "-rf"
        )
        failed = [line.split(" ", 2)[1] for line in first.outlines if line.startswith("FAILED ")]
        assert failed and all(node.split("::")[0].endswith("selected.py") for node in failed), first.outlines
        again = pytester.runpytest_subprocess(
            "--upsertmat-impl=broken_impl:factory", "-p", "no:cacheprovider", failed[0]
        )
    assert again.parseoutcomes() == {"failed": 1}, again.outlines


COUNTING_IMPL = BROKEN_IMPL.replace(
    "            return Change(RowKind.INSERT, out.row)",
    "            with open('hits.txt', 'a') as hits:\n"
    "                hits.write('hit\\n')\n"
    "            return Change(RowKind.INSERT, out.row)",
)
"""BROKEN_IMPL noting in ``hits.txt`` every time its bug shows."""


@pytest.mark.usefixtures("dev_profile")
def test_quick_mode_stops_at_the_first_failure_without_shrinking(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(counting_impl=COUNTING_IMPL)
    selected = "valid_streams or bare_update_streams or tolerated_streams"
    result = pytester.runpytest_subprocess(
        "--upsertmat-impl=counting_impl:factory",
        "--upsertmat-quick",
        "-p",
        "no:cacheprovider",
        "-k",
        selected,
    )
    assert result.parseoutcomes() == {"failed": 1, "deselected": SUITE_TESTS - 3}, result.outlines
    result.stdout.fnmatch_lines(["*stopping after 1 failures*"])
    result.stdout.fnmatch_lines(
        ["*hypothesis profile 'upsertmat-dev' (--upsertmat-quick: no shrinking, stops at the first failure)*"]
    )
    # the example that failed first, and Hypothesis's final replay of it: no shrinking
    assert (pytester.path / "hits.txt").read_text().count("hit") <= 2


@pytest.mark.usefixtures("dev_profile")
def test_unknown_implementation_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess("--upsertmat-impl=NOPE/heap")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--upsertmat-impl=NOPE/heap*unknown implementation*"])
    missing = pytester.runpytest_subprocess("--upsertmat-impl=no_such_module:factory")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR


def test_subclassing_the_suite_in_a_user_module(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-ci")
    monkeypatch.setenv("UPSERTMAT_EXAMPLES_SCALE", "0.2")
    pytester.makepyfile(
        test_mine="""
        from upsertmat.conformance.suite import MaterializerTests

        class TestMine(MaterializerTests):
            implementation = "LEGACY/heap"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=SUITE_TESTS - LEGACY_SKIPS, skipped=LEGACY_SKIPS)
    result.stdout.fnmatch_lines(["*the suite ran with hypothesis profile 'upsertmat-ci'*"])


UNRELATED_TEST = """
from hypothesis import given, settings, strategies as st

def test_profile_untouched():
    current = settings.default
    print("PROFILE", settings.get_current_profile_name(), current.max_examples, current.database is not None)

@given(st.integers())
def test_some_property(n):
    assert n == n
"""


def _profile_line(result: pytest.RunResult) -> str:
    lines = [line[line.index("PROFILE ") :] for line in result.stdout.lines if "PROFILE " in line]
    assert len(lines) == 1, result.stdout.str()
    return lines[0]


@pytest.mark.parametrize("variable", [None, "upsertmat-ci", "ci", "no-such-profile"])
def test_an_unrelated_project_keeps_its_hypothesis_settings(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, variable: str | None
) -> None:
    """The plugin is loaded in every session (entry point) but selects nothing here."""
    if variable is None:
        monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    else:
        monkeypatch.setenv("HYPOTHESIS_PROFILE", variable)
    pytester.makepyfile(test_unrelated=UNRELATED_TEST)
    # Hypothesis picks a profile on its own (its built-in "ci" one when a CI variable is set), so
    # the expectation is what the same session picks without the plugin.
    without = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:upsertmat", "-s")
    without.assert_outcomes(passed=2)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-s")
    result.assert_outcomes(passed=2)
    assert _profile_line(result) == _profile_line(without)
    assert "upsertmat" not in "\n".join(line for line in result.stdout.lines if "plugins:" not in line)


def test_hypothesis_profile_option_wins(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-ci")
    pytester.makepyfile(
        test_mine="""
        from hypothesis import settings
        from upsertmat.conformance.suite import MaterializerTests

        class TestMine(MaterializerTests):
            implementation = "LEGACY/heap"

            def test_profile_loaded(self):
                assert settings.get_current_profile_name() == "upsertmat-nightly"
                assert settings.default.max_examples == 2000
        """
    )
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "--hypothesis-profile=upsertmat-nightly", "-k", "profile_loaded"
    )
    result.assert_outcomes(passed=1, deselected=SUITE_TESTS)


def test_ci_profile_from_environment(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-ci")
    pytester.makepyfile(
        test_mine="""
        from hypothesis import settings
        from upsertmat.conformance.suite import MaterializerTests

        class TestMine(MaterializerTests):
            implementation = "LEGACY/heap"

            def test_profile_loaded(self):
                current = settings.default
                assert settings.get_current_profile_name() == "upsertmat-ci"
                assert current.derandomize and current.deadline is None and current.database is None
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "profile_loaded")
    result.assert_outcomes(passed=1, deselected=SUITE_TESTS)


def test_short_profile_names_still_work(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # "nightly" is not registered by Hypothesis or the user: it names upsertmat-nightly
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "nightly")
    pytester.makepyfile(
        test_mine="""
        from hypothesis import settings
        from upsertmat.conformance.suite import MaterializerTests

        class TestMine(MaterializerTests):
            implementation = "LEGACY/heap"

            def test_profile_loaded(self):
                assert settings.get_current_profile_name() == "upsertmat-nightly"
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-k", "profile_loaded")
    result.assert_outcomes(passed=1, deselected=SUITE_TESTS)


def test_unknown_profile_is_a_usage_error(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "no-such-profile")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--upsertmat-impl=LEGACY/heap")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*HYPOTHESIS_PROFILE='no-such-profile'*"])


def test_a_failing_run_does_not_bury_its_failure_under_rule7_warnings(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The derandomized profile: whether misses come before the first failure depends on the
    # examples drawn (with the dev profile's random ones the very first could fail, with no miss).
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "upsertmat-ci")
    monkeypatch.delenv("UPSERTMAT_EXAMPLES_SCALE", raising=False)
    pytester.makepyfile(broken_impl=BROKEN_IMPL)
    result = pytester.runpytest_subprocess(
        "--upsertmat-impl=broken_impl:factory", "-p", "no:cacheprovider", "-k", "tolerated_streams"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    text = "\n".join(result.stdout.lines)
    assert "matched no stored row (context key" not in text  # no captured miss records
    first = next(
        i
        for i, line in enumerate(result.stdout.lines)
        if line.startswith("E") and "Mismatch: breaks rule" in line
    )
    assert first < 60, f"first failure on line {first}"
    result.stdout.fnmatch_lines(["upsertmat: * retraction(s) matched no stored row during the suite*"])


def test_rule7_records_are_counted_and_demoted_to_debug(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from upsertmat.conformance.misses import MESSAGE_PREFIX, misses_at_debug
    from upsertmat.spec import Keys, ModelMaterializer, delete

    model = ModelMaterializer(Keys(pk=(0,)))
    with caplog.at_level(logging.WARNING, logger="upsertmat"), misses_at_debug() as counter:
        before = counter.count
        model.process(delete(1, "x"))
        logging.getLogger("upsertmat").warning("something else")
    assert counter.count == before + 1
    assert [record.getMessage() for record in caplog.records] == ["something else"]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="upsertmat"), misses_at_debug():
        model.process(delete(1, "x"))
    assert [(r.levelname, r.getMessage().startswith(MESSAGE_PREFIX)) for r in caplog.records] == [
        ("DEBUG", True)
    ]
    model.process(delete(1, "x"))  # outside the suite: a warning as before
    assert caplog.records[-1].levelname == "WARNING"


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "list_materializer.py"
# Everything that needs TTL: its scenarios, its streams (one test per configuration), the TTL
# state machine; and the lifecycle machine (no state transfer offered).
NO_TTL_SKIPS = len(TTL_SCENARIOS) + len(TTL_CONFIGS) + 2
PER_KEY_SCENARIOS = sum(scenario.granularity is Granularity.PER_KEY for scenario in TTL_SCENARIOS)


@pytest.mark.usefixtures("dev_profile")
def test_a_factory_without_ttl_passes_with_the_ttl_tests_skipped(pytester: pytest.Pytester) -> None:
    """The worked example of docs/conformance.md: ``Unsupported`` from the factory skips (fast)."""
    pytester.makepyfile(list_materializer=EXAMPLE.read_text(encoding="utf-8"))
    result = pytester.runpytest_subprocess(
        "--upsertmat-impl=list_materializer:factory", "-p", "no:cacheprovider", "-rs"
    )
    result.assert_outcomes(passed=SUITE_TESTS - NO_TTL_SKIPS, skipped=NO_TTL_SKIPS)
    reasons = skip_reasons(result)
    assert reasons["not supported: no TTL: this implementation keeps every row until it is retracted"] == (
        NO_TTL_SKIPS - 1 - PER_KEY_SCENARIOS
    )
    assert reasons["a per_key scenario; this implementation is per_element"] == PER_KEY_SCENARIOS
    assert sum(count for reason, count in reasons.items() if reason.startswith("lifecycle rules need")) == 1


def skip_reasons(result: pytest.RunResult) -> dict[str, int]:
    """How many tests were skipped for each reason (``-rs``'s ``SKIPPED [N] where: reason``)."""
    reasons: dict[str, int] = {}
    for line in result.stdout.lines:
        if line.startswith("SKIPPED ["):
            count, _, rest = line.removeprefix("SKIPPED [").partition("] ")
            reason = rest.split(": ", 1)[1]
            reasons[reason] = reasons.get(reason, 0) + int(count)
    return reasons


PROCESSING_TIME_ONLY = '''
from upsertmat.impls import create_named
from upsertmat.spec import TimeDomain, Unsupported


class NoExport:
    """VALUE on heap (per-element TTL) whose state export is refused."""

    def __init__(self, inner):
        self.inner = inner
        self.process, self.advance_time, self.close = inner.process, inner.advance_time, inner.close

    @property
    def retract_misses(self):
        return self.inner.retract_misses

    @property
    def now(self):
        return self.inner.now

    def export_elements(self):
        raise Unsupported("no state export here")

    def import_elements(self, items, now):
        raise Unsupported("no state import here")


def factory(keys, settings):
    if settings.ttl.enabled and settings.ttl.time_domain is TimeDomain.EVENT_TIME:
        raise Unsupported("processing-time TTL only")
    return NoExport(create_named("VALUE/heap", keys, settings))
'''


@pytest.mark.usefixtures("dev_profile")
def test_refused_ttl_configurations_and_export_are_skipped_the_rest_runs(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(partial_impl=PROCESSING_TIME_ONLY)
    result = pytester.runpytest_subprocess(
        "--upsertmat-impl=partial_impl:factory", "-p", "no:cacheprovider", "-rs", "-k", "ttl or lifecycle"
    )
    reasons = skip_reasons(result)
    assert result.parseoutcomes().get("failed", 0) == 0, result.stdout.lines
    processing = [ttl for ttl in TTL_CONFIGS if ttl.time_domain.value == "processing_time"]
    event_scenarios = sum(
        s.granularity is Granularity.PER_ELEMENT and s.ttl.time_domain.value == "event_time"
        for s in TTL_SCENARIOS
    )
    # the event-time streams and scenarios are skipped; processing time runs (streams, machine)
    assert (
        reasons["not supported: processing-time TTL only"]
        == len(TTL_CONFIGS) - len(processing) + event_scenarios
    )
    assert reasons["not supported: no state export here"] == 1  # the lifecycle machine
    assert result.parseoutcomes()["passed"] >= len(processing) + 1
