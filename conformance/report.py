"""The conformance report: run the suite once, say per rule and per area what passed.

:func:`run_suite` runs the shipped suite in-process under pytest (``--upsertmat-impl`` or
``--upsertmat-cmd``) with a :class:`Collector` plugin that keeps every test's outcome, skip
reason and failure. A failure raised by a check is a :class:`~.mismatch.Mismatch`; its
counterexample is replayed on the model (:func:`rules_exercised`) to name the rules of
docs/spec.md the failing input exercises. :func:`render_markdown` and :func:`to_json` write
the one-page report. Cost: one suite run, plus one model replay per failure.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ..spec import Granularity, Keys, ModelMaterializer, RowKind, TtlSettings
from .generators import Advance, Step
from .mismatch import Mismatch
from .plugin import suite_path
from .protocol import ProtocolError, encode_step, ttl_flags

RULES: dict[int, str] = {
    1: "`+I`/`+U` are ADD, `-U`/`-D` RETRACT; the kind has no other effect",
    2: "match by upsert-key projection, else by whole row",
    3: "ADD without upsert key appends (multiset)",
    4: "ADD with upsert key replaces the first match in place",
    5: "every ADD emits the incoming row, `+I` into empty state, else `+U`",
    6: "RETRACT removes the first match in insertion order",
    7: "RETRACT without match: nothing emitted or changed, counted",
    8: "RETRACT emptying the key emits `-D` with the incoming row's values",
    9: "RETRACT of the last element emits `+U` of the new last",
    10: "RETRACT of a non-last element emits nothing",
    11: "0 or 1 output per input, only `+I`, `+U`, `-D`",
}

AREAS: dict[str, str] = {
    "test_scenario": "scenarios (hand-written catalogue)",
    "test_pinned_streams": "pinned streams",
    "test_valid_streams": "generated streams (valid, retract-style)",
    "test_bare_update_streams": "bare updates (upsert-style streams)",
    "test_tolerated_streams": "tolerated input",
    "test_long_histories": "long histories",
    "test_state_machine": "state machine",
    "test_ttl_scenario": "TTL scenarios",
    "test_ttl_streams": "TTL streams",
    "test_ttl_state_machine": "TTL state machine",
    "test_lifecycle_state_machine": "lifecycle (checkpoint/restore, migration, rescaling; split runs)",
}
"""Test function -> suite area; ``test_ttl_streams`` is split by domain and policy."""


@dataclass
class TestResult:
    """One test of the suite."""

    name: str
    area: str
    outcome: str  # passed | failed | skipped
    reason: str = ""
    counterexample: str = ""
    rules: list[int] = field(default_factory=list)
    reproduce: dict[str, Any] | None = None
    """What the failing run was fed, to replay by hand: ``pk``, ``upsert_key``, ``settings``
    (``--set``), ``granularity`` and ``input`` (JSON Lines), when the failure carries them."""


def reproduction(
    keys: Keys, steps: Sequence[Step], settings: dict[str, str], granularity: Granularity | None = None
) -> dict[str, Any]:
    """The :attr:`TestResult.reproduce` record of a failing input sequence."""
    return {
        "pk": list(keys.pk),
        "upsert_key": list(keys.upsert_key),
        "settings": settings,
        "granularity": None if granularity is None or not settings else granularity.value,
        "input": [encode_step(step) for step in steps],
    }


def _reproduction_of(error: BaseException) -> dict[str, Any] | None:
    """The reproduction a failure carries: a Mismatch's steps, or a ProtocolError's run."""
    found = _find(error, (Mismatch, ProtocolError))
    if isinstance(found, Mismatch) and found.steps:
        ttl = found.ttl if found.ttl is not None else TtlSettings()
        return reproduction(found.keys, found.steps, ttl_flags(ttl), found.granularity)
    if isinstance(found, ProtocolError) and found.keys is not None and found.steps:
        return reproduction(found.keys, found.steps, found.settings)
    return None


def rules_exercised(mismatch: Mismatch) -> list[int]:
    """The rule that decides the expected output of the failing input (docs/spec.md), found by
    replaying the model on the counterexample: for an ADD rule 4 (an upsert-key replacement) or
    5, for a RETRACT rule 7, 8, 9 or 10; plus 11 when the implementation emitted more than one
    change or another kind. An earlier wrong match (rules 2, 3, 6) shows as one of these later."""
    if not mismatch.steps:
        return [7]  # only the final miss count differed
    model = ModelMaterializer(mismatch.keys, mismatch.ttl, mismatch.granularity)
    for step in mismatch.steps[:-1]:
        if isinstance(step, Advance):
            model.advance_time(step.time)
        else:
            model.process(step)
    last = mismatch.steps[-1]
    rules: set[int] = set()
    if len(mismatch.actual_ops) > 1 or set(mismatch.actual_ops) - {"+I", "+U", "-D"}:
        rules.add(11)
    if isinstance(last, Advance):
        return sorted(rules | {11})  # output on a clock line
    keys = mismatch.keys
    if last.kind.is_add:
        stored = dict(model.histories()).get(keys.context_key(last.row), [])
        wanted = keys.match_key(last.row)
        replaces = keys.has_upsert_key and any(keys.match_key(row) == wanted for row in stored)
        rules.add(4 if replaces else 5)
        return sorted(rules)
    misses = model.retract_misses
    out = model.process(last)
    if model.retract_misses > misses:
        rules.add(7)
    else:
        rules.add(10 if out is None else 8 if out.kind is RowKind.DELETE else 9)
    return sorted(rules)


def _counterexample(error: BaseException) -> tuple[str, list[int]]:
    mismatch = _find_mismatch(error)
    text = str(error).strip()
    lines = text.splitlines()
    body = "\n".join(lines[:40]) + ("\n..." if len(lines) > 40 else "")
    if mismatch is None:
        # a crash or protocol error: Hypothesis's notes hold the shrunk input that caused it
        notes = [
            str(note)
            for note in getattr(error, "__notes__", ())
            if str(note).startswith(("Falsifying example", "Failing test case"))
        ]
        return "\n".join([body, *notes[:1]]), []
    if mismatch.steps:
        inputs = "\n".join(f"  [{i}] {step!r}" for i, step in enumerate(mismatch.steps[-60:]))
        body = f"{lines[0]}\nfed (the failing input last):\n{inputs}"
    return body, rules_exercised(mismatch)


def _find_mismatch(error: BaseException) -> Mismatch | None:
    found = _find(error, (Mismatch,))
    return found if isinstance(found, Mismatch) else None


def _find(error: BaseException, kinds: tuple[type[BaseException], ...]) -> BaseException | None:
    """``error``, or the first of its group's exceptions, that is one of ``kinds``."""
    if isinstance(error, kinds):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _find(inner, kinds)
            if found is not None:
                return found
    return None


class Collector:
    """A pytest plugin keeping each suite test's outcome (see :class:`TestResult`)."""

    def __init__(self) -> None:
        self.results: list[TestResult] = []
        self.profile = ""

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
        outcome = yield
        report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
        if report.when != "call" and report.outcome == "passed":
            return
        function = getattr(item, "originalname", item.name)
        area = AREAS.get(function, function)
        parameter = getattr(getattr(item, "callspec", None), "id", "")
        if function == "test_ttl_streams":
            area = f"TTL streams: {parameter.replace('-', ', ')}"
        result = TestResult(item.name, area, report.outcome)
        if report.skipped and isinstance(report.longrepr, tuple):
            result.reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.failed and call.excinfo is not None:
            result.counterexample, result.rules = _counterexample(call.excinfo.value)
            result.reproduce = _reproduction_of(call.excinfo.value)
        self.results.append(result)

    def pytest_terminal_summary(self) -> None:
        from hypothesis import settings

        self.profile = settings.get_current_profile_name()


def run_suite(target: Sequence[str], profile: str, extra: Sequence[str] = ()) -> Collector:
    """Run the suite with ``target`` options (e.g. ``["--upsertmat-impl=LEGACY/heap"]``)."""
    collector = Collector()
    previous = os.environ.get("HYPOTHESIS_PROFILE")
    os.environ["HYPOTHESIS_PROFILE"] = profile
    try:
        with tempfile.TemporaryDirectory(prefix="upsertmat-report-") as directory:
            ini = Path(directory) / "pytest.ini"
            ini.write_text("[pytest]\n", encoding="utf-8")
            arguments = [str(suite_path()), "-c", str(ini), "--rootdir", directory, "-p", "no:cacheprovider"]
            # upsertmat (this very module) is imported before pytest starts, so pytest cannot
            # rewrite its asserts and would warn about it: the suite's checks do not need it.
            arguments += ["-W", "ignore::pytest.PytestAssertRewriteWarning"]
            with contextlib.redirect_stdout(sys.stderr):
                pytest.main([*arguments, "-q", "--tb=no", *target, *extra], plugins=[collector])
    finally:
        if previous is None:
            os.environ.pop("HYPOTHESIS_PROFILE", None)
        else:
            os.environ["HYPOTHESIS_PROFILE"] = previous
    return collector


def _status(results: Sequence[TestResult]) -> str:
    outcomes = {result.outcome for result in results}
    if "failed" in outcomes:
        return "FAIL"
    if "passed" in outcomes:
        return "pass"
    return "skipped"


def rule_table(results: Sequence[TestResult]) -> dict[int, dict[str, Any]]:
    """Per rule: FAIL (with the failing tests), pass, not run, or ``undecided``: no failure is
    attributed to the rule, but a test failed without a counterexample a rule decides (the
    implementation crashed or broke the protocol), so the rule cannot be said to pass."""
    ran = any(r.outcome != "skipped" for r in results if not r.area.startswith("TTL"))
    unattributed = [r.name for r in results if r.outcome == "failed" and not r.rules]
    table: dict[int, dict[str, Any]] = {}
    for rule, text in RULES.items():
        failing = [r.name for r in results if r.outcome == "failed" and rule in r.rules]
        if failing:
            status = "FAIL"
        elif not ran:
            status = "not run"
        else:
            status = "undecided" if unattributed else "pass"
        table[rule] = {"text": text, "status": status, "failing_tests": failing or unattributed}
    return table


def reproduce_command(target: Sequence[str], record: dict[str, Any], path: str) -> str:
    """The command that replays ``record``'s input (saved at ``path``) against the model, for
    the suite's ``target`` options (``--upsertmat-impl=...`` or ``--upsertmat-cmd=...``)."""
    words = ["python", "-m", "upsertmat.conformance.reproduce"]
    for option in target:
        name, _, value = option.partition("=")
        if name == "--upsertmat-impl":
            words += ["--impl", value]
        elif name == "--upsertmat-cmd":
            words += ["--cmd", value]
        elif name == "--upsertmat-ttl-granularity" and record["settings"]:
            words += ["--ttl-granularity", value]
    words += ["--pk", ",".join(map(str, record["pk"]))]
    if record["upsert_key"]:
        words += ["--upsert-key", ",".join(map(str, record["upsert_key"]))]
    for key, value in record["settings"].items():
        words += ["--set", f"{key}={value}"]
    return shlex.join([*words, path])


def anchor(test: str) -> str:
    """A test's name as a file-name part and HTML anchor (``test_x[a-b]`` -> ``test_x-a-b``)."""
    return "".join(c if c.isalnum() or c in "_-" else "-" for c in test).strip("-")


def counterexample_name(base: str, test: str) -> str:
    """The file name of a failing test's counterexample input next to report ``base``."""
    return f"{base}.{anchor(test)}.jsonl"


def to_json(title: str, command: str, collector: Collector, target: Sequence[str] = ()) -> dict[str, Any]:
    """The report as JSON-ready data (``target``: the suite options it ran with)."""
    results = collector.results
    areas: dict[str, list[TestResult]] = {}
    for result in results:
        areas.setdefault(result.area, []).append(result)
    return {
        "implementation": title,
        "command": command,
        "target": list(target),
        "profile": collector.profile,
        "summary": {k: sum(r.outcome == k for r in results) for k in ("passed", "failed", "skipped")},
        "rules": rule_table(results),
        "areas": {
            area: {"status": _status(members), "tests": [asdict(m) for m in members]}
            for area, members in areas.items()
        },
    }


def refreshed(data: dict[str, Any]) -> dict[str, Any]:
    """A report's JSON with its rule table computed again from its tests (as this version of
    :func:`rule_table` computes it); everything else as it was."""
    results = [
        TestResult(**{key: test[key] for key in TestResult.__dataclass_fields__ if key in test})
        for area in data["areas"].values()
        for test in area["tests"]
    ]
    return {**data, "rules": rule_table(results)}


def render_markdown(data: dict[str, Any], base: str | None = None) -> str:
    """One page: summary, rules, areas, then each failure's minimal counterexample; with
    ``base`` (the report's file name without extension), the command reproducing each, on
    the input :func:`counterexample_files` writes next to the page."""
    summary = data["summary"]
    lines = [
        f"# Conformance report: {data['implementation']}",
        "",
        f"Generated by `{data['command']}` (Hypothesis profile `{data['profile']}`).",
        f"**{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped.**",
        "",
        "## Rules of the specification (docs/spec.md)",
        "",
        "| rule | | result |",
        "|---|---|---|",
    ]
    for rule, row in data["rules"].items():
        failing = row["failing_tests"]
        shown = ", ".join(f"`{name}`" for name in failing[:3]) + (
            f" and {len(failing) - 3} more" if len(failing) > 3 else ""
        )
        result = row["status"] + (f": {len(failing)} test(s), {shown}" if failing else "")
        lines.append(f"| {rule} | {row['text']} | {result} |")
    lines += [
        "",
        "A rule is FAIL when it decides the expected output of a minimal failing input (the model",
        "replayed on the counterexample); a wrong match (rules 2, 3, 6) shows as the emission rule",
        "of the input where it becomes visible. A rule is undecided when no failure is attributed",
        "to it but a test failed without a counterexample a rule decides (a crash, a protocol",
        "error). Rule 12 (convergence) follows from rules 1-11.",
        "",
        "## Suite areas",
        "",
        "| area | result | tests | skipped because |",
        "|---|---|---|---|",
    ]
    for area, entry in data["areas"].items():
        tests = entry["tests"]
        counts = ", ".join(
            f"{sum(t['outcome'] == k for t in tests)} {k}"
            for k in ("passed", "failed", "skipped")
            if any(t["outcome"] == k for t in tests)
        )
        reasons = sorted({t["reason"] for t in tests if t["reason"]})
        lines.append(f"| {area} | {entry['status']} | {counts} | {'; '.join(reasons)} |")
    failures = [t for entry in data["areas"].values() for t in entry["tests"] if t["outcome"] == "failed"]
    if failures:
        lines += ["", "## Minimal counterexamples", ""]
        for test in failures:
            rules = f" (rules {', '.join(map(str, test['rules']))})" if test["rules"] else ""
            lines += [
                f'<a id="{anchor(test["name"])}"></a>',
                "",
                f"### {test['name']}{rules}",
                "",
                "```",
                test["counterexample"],
                "```",
                "",
            ]
            record = test.get("reproduce")
            if record and base is not None:
                path = counterexample_name(base, test["name"])
                shown = "\n".join(record["input"][-40:])
                lines += [
                    f"To reproduce: the input is [`{path}`]({path}), next to this page (shown below); this "
                    "prints the implementation's output next to the model's, input by input:",
                    "",
                    "```",
                    reproduce_command(data.get("target", []), record, path),
                    "```",
                    "",
                    "```",
                    shown
                    if len(record["input"]) <= 40
                    else f"... ({len(record['input']) - 40} more)\n{shown}",
                    "```",
                    "",
                ]
    return "\n".join(lines).rstrip() + "\n"


def counterexample_files(data: dict[str, Any], base: str) -> dict[str, str]:
    """File name -> JSON Lines text of every failing test's reproducible input."""
    files: dict[str, str] = {}
    for entry in data["areas"].values():
        for test in entry["tests"]:
            record = test.get("reproduce")
            if test["outcome"] == "failed" and record:
                files[counterexample_name(base, test["name"])] = "\n".join(record["input"]) + "\n"
    return files
