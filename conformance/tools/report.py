"""The conformance report: run the suite once, say per rule and per area what passed.

:func:`run_suite` runs the shipped suite in-process under pytest (``--upsertmat-impl`` or
``--upsertmat-cmd``) with a :class:`Collector` plugin that keeps every test's outcome, skip
reason and failure. A failure raised by a check or a state machine is a
:class:`~.mismatch.Mismatch`: it carries every input fed and its diagnosis names the rule of
docs/spec.md it breaks (or TTL, with the hint to declare ``Unsupported``, or a state move).
:func:`render_markdown` and :func:`to_json` write the one-page report, with each failure's
inputs and the command that replays them (:mod:`.reproduce`); :func:`write_report` does all of
it (what ``upsertmat conformance`` runs). Cost: one suite run, plus one model replay per failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ...spec import Granularity, Keys, TtlSettings
from ..generators import Step
from ..machine import INVARIANTS
from ..mismatch import RULES, TTL_HINT, Differs, Mismatch, find_mismatch
from ..plugin import CMD_OPTION, OPTION, suite_path
from ..protocol import ProtocolError, encode_step, ttl_flags

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
    breaks: str = ""
    """What the failure breaks when it is none of rules 1-11 (TTL, a state move); see
    :class:`~.mismatch.Diagnosis`."""
    ttl_ignored: bool = False
    """The implementation behaved as if it had no TTL (the report suggests ``Unsupported``)."""
    reproduce: dict[str, Any] | None = None
    """What the failing run was fed, to replay by hand: ``pk``, ``upsert_key``, ``settings``
    (``--set``), ``granularity`` and ``input`` (JSON Lines), when the failure carries them."""
    differs: str = ""
    """What the failure found different (a :class:`~.mismatch.Differs` value: ``output``,
    ``crash``, ``state`` or ``misses``); empty when it carries no Mismatch, or in a report
    written before this field (then read as an output: :func:`not_isolated_from`)."""


STRUCTURAL_RULES = (2, 3, 4, 6)
"""The rules of matching and placement: a defect in one changes the stored rows, and a check
that compares outputs only sees it at the input where an output becomes wrong, named there by
the emission rule that decides that output (docs/conformance.md, *The conformance report*)."""


def not_isolated_from(result: TestResult) -> tuple[int, ...]:
    """The rules of :data:`STRUCTURAL_RULES` that a failed test's own rules cannot be told apart
    from: every one it does not name, when the failure was seen in an output or a crash (a wrong
    match or placement at or before the failing input gives the same output); none when it
    compared the stored rows or the miss count (the state machine names the rule where it acts),
    when it names rule 11 alone (more than one output, or another kind: no stored row causes
    that), or when it names no rule."""
    if result.outcome != "failed" or not result.rules or set(result.rules) <= {11}:
        return ()
    if result.differs in (Differs.STATE.value, Differs.MISSES.value):
        return ()
    return tuple(rule for rule in STRUCTURAL_RULES if rule not in result.rules)


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
    """The reproduction a failure carries: a Mismatch's steps (unless a state machine moved the
    state between them), or a ProtocolError's run."""
    found = _find(error, (Mismatch, ProtocolError))
    if isinstance(found, Mismatch) and found.steps and found.replayable:
        ttl = found.ttl if found.ttl is not None else TtlSettings()
        return reproduction(found.keys, found.steps, ttl_flags(ttl), found.granularity)
    if isinstance(found, ProtocolError) and found.keys is not None and found.steps:
        return reproduction(found.keys, found.steps, found.settings)
    return None


MAX_SHOWN = 200
"""Inputs listed in a counterexample (the counterexample file holds them all)."""

_FAILING_EXAMPLE = ("Falsifying example", "Failing test case", "Failing explicit example")
"""How Hypothesis's note naming the failing example starts (it changed across versions)."""

_PROGRAM_LINE = re.compile(r"^(\w+(, \w+)* = )?state\b")
"""A line of the program Hypothesis prints for a failing state machine."""


def _listing(steps: Sequence[Step]) -> list[str]:
    """``  [i] step`` lines, every input (the first ones elided past :data:`MAX_SHOWN`)."""
    skipped = max(0, len(steps) - MAX_SHOWN)
    lines = [f"  ... ({skipped} earlier inputs: see the counterexample file)"] if skipped else []
    return lines + [f"  [{i}] {step!r}" for i, step in enumerate(steps) if i >= skipped]


def hypothesis_notes(error: BaseException, with_inputs: bool) -> list[str]:
    """What Hypothesis attached to a failure that a reader needs: a state machine's steps (the
    program that fails, its invariant checks left out), the falsifying example when the failure
    does not carry its inputs itself (``with_inputs``), and the ``@reproduce_failure`` blob."""
    shown: list[str] = []
    program: list[str] = []
    for note in map(str, getattr(error, "__notes__", ())):
        if _PROGRAM_LINE.match(note):
            if note.removeprefix("state.").removesuffix("()") not in INVARIANTS:
                program += note.splitlines()
        elif note.startswith(_FAILING_EXAMPLE) and not with_inputs and not note.endswith("<state machine>"):
            shown.append(note)
        elif "@reproduce_failure" in note:
            shown.append(note.strip())
    if program:
        steps = "\n".join(f"  {line}" for line in program)
        shown.insert(0, f"the state machine's steps, as Hypothesis prints them:\n{steps}")
    return shown


def _counterexample(error: BaseException) -> tuple[str, Mismatch | None]:
    """The failure as the report shows it: what it breaks, its first line, every input fed and
    a state machine's steps; and the Mismatch it carries, if any."""
    mismatch = find_mismatch(error)
    group = (
        [f"(Hypothesis found {len(error.exceptions)} distinct failures; the first is shown)"]
        if isinstance(error, BaseExceptionGroup)
        else []
    )
    if mismatch is None:
        # a crash or protocol error: Hypothesis's notes hold the shrunk input that caused it
        found = _find(error, (ProtocolError,)) or error
        lines = str(found).strip().splitlines()
        body = [*lines[:40], *(["..."] if len(lines) > 40 else [])]
        steps = found.steps if isinstance(found, ProtocolError) else ()
        if steps:
            body += ["fed (every input of the failing run):", *_listing(steps)]
        return "\n".join([*group, *body, *hypothesis_notes(found, bool(steps))]), None
    message = mismatch.message.splitlines()
    body = [mismatch.verdict, *message[:1]]
    if mismatch.steps:
        body += ["fed (every input, the failing one last):", *_listing(mismatch.steps)]
    if not mismatch.replayable:
        body.append(
            "(the state machine moved the state between these inputs: checkpoint/restore, migration "
            "or rescaling, see its steps below; feeding them to a fresh instance is not the whole story)"
        )
    return "\n".join([*group, *body, *hypothesis_notes(mismatch, True)]), mismatch


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
        self.failed_nodeids: list[str] = []
        """pytest's node ids of the failed tests, relative to the directory the suite ran in."""
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
        if report.failed:
            self.failed_nodeids.append(report.nodeid)
        if report.skipped and isinstance(report.longrepr, tuple):
            result.reason = str(report.longrepr[2]).removeprefix("Skipped: ")
        elif report.failed and call.excinfo is not None:
            result.counterexample, mismatch = _counterexample(call.excinfo.value)
            if mismatch is not None:
                diagnosis = mismatch.diagnosis
                result.rules = list(diagnosis.rules)
                result.breaks, result.ttl_ignored = diagnosis.breaks, diagnosis.ttl_ignored
                result.differs = mismatch.differs.value
            result.reproduce = _reproduction_of(call.excinfo.value)
        self.results.append(result)

    def pytest_terminal_summary(self) -> None:
        from hypothesis import settings

        self.profile = settings.get_current_profile_name()


def run_suite(target: Sequence[str], profile: str, extra: Sequence[str] = ()) -> Collector:
    """Run the suite with ``target`` options (e.g. ``["--upsertmat-impl=LEGACY/heap"]``).

    The current directory is pytest's rootdir (so the node ids pytest prints are relative to
    it and pytest accepts them back, run from there), with an empty configuration file of its
    own (so a project's ``pytest.ini``/``pyproject.toml`` options do not apply) and no cache.
    """
    collector = Collector()
    previous = os.environ.get("HYPOTHESIS_PROFILE")
    os.environ["HYPOTHESIS_PROFILE"] = profile
    try:
        with tempfile.TemporaryDirectory(prefix="upsertmat-report-") as directory:
            ini = Path(directory) / "pytest.ini"
            ini.write_text("[pytest]\n", encoding="utf-8")
            arguments = [
                str(suite_path()),
                "-c",
                str(ini),
                "--rootdir",
                os.getcwd(),
                "-p",
                "no:cacheprovider",
            ]
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
    """Per rule: FAIL (with the failing tests), ``not run``, ``not isolated``, ``undecided`` or
    pass. ``not isolated``: no failure names the rule, but one seen only in an output could be
    caused by it (:func:`not_isolated_from`: a wrong match or placement, rules 2, 3, 4 and 6,
    shows as the emission rule of the input where it becomes visible), so the rule cannot be said
    to pass; its failing tests are those failures. ``undecided``: no failure is attributed to the
    rule, but a test failed without a counterexample a rule decides (a program crashed or broke
    the protocol). A failure that breaks something else (TTL, a state move:
    :attr:`TestResult.breaks`) is decided, and attributed to no rule. O(rules x tests)."""
    ran = any(r.outcome != "skipped" for r in results if not r.area.startswith("TTL"))
    unattributed = [r.name for r in results if r.outcome == "failed" and not r.rules and not r.breaks]
    table: dict[int, dict[str, Any]] = {}
    for rule, text in RULES.items():
        failing = [r.name for r in results if r.outcome == "failed" and rule in r.rules]
        hidden = [r.name for r in results if rule in not_isolated_from(r)]
        if failing:
            status = "FAIL"
        elif not ran:
            status = "not run"
        elif hidden:
            status, failing = "not isolated", hidden
        else:
            status = "undecided" if unattributed else "pass"
        table[rule] = {"text": text, "status": status, "failing_tests": failing or unattributed}
    return table


def needs_workdir(target: Sequence[str]) -> bool:
    """Whether replaying depends on the directory the suite ran in: a ``module:factory`` is
    imported from it, a program's command may name files relative to it."""
    return any(
        option.startswith(f"{CMD_OPTION}=") or (option.startswith(f"{OPTION}=") and ":" in option)
        for option in target
    )


def workdir_for(target: Sequence[str], page_directory: Path, workdir: Path | None = None) -> str | None:
    """The ``--workdir`` of the reproduce commands on a page written to ``page_directory``: the
    directory the suite ran in (``workdir``, default the current one), relative to the page's
    directory (so a report moved with its tree still works), or None when not needed."""
    if not needs_workdir(target):
        return None
    start = (workdir or Path.cwd()).resolve()
    try:
        relative = os.path.relpath(start, page_directory.resolve())
    except ValueError:  # another drive (Windows)
        return str(start)
    return None if relative == os.curdir else relative


def reproduce_command(
    target: Sequence[str], record: dict[str, Any], path: str, workdir: str | None = None
) -> str:
    """The command that replays ``record``'s input (saved at ``path``) against the model, for
    the suite's ``target`` options (``--upsertmat-impl=...`` or ``--upsertmat-cmd=...``), run
    in the directory of ``path``; ``workdir`` (:func:`workdir_for`) is where the suite ran."""
    words = ["upsertmat", "conformance-reproduce"]
    if workdir is not None:
        words += ["--workdir", workdir]
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


def to_json(
    title: str, command: str, collector: Collector, target: Sequence[str] = (), workdir: str | None = None
) -> dict[str, Any]:
    """The report as JSON-ready data (``target``: the suite options it ran with; ``workdir``:
    where it ran, relative to the report, when replaying needs it, see :func:`workdir_for`)."""
    results = collector.results
    areas: dict[str, list[TestResult]] = {}
    for result in results:
        areas.setdefault(result.area, []).append(result)
    return {
        "implementation": title,
        "command": command,
        "target": list(target),
        "workdir": workdir,
        "profile": collector.profile,
        "summary": {k: sum(r.outcome == k for r in results) for k in ("passed", "failed", "skipped")},
        "rules": rule_table(results),
        "areas": {
            area: {"status": _status(members), "tests": [asdict(m) for m in members]}
            for area, members in areas.items()
        },
    }


def _result_of(test: dict[str, Any]) -> TestResult:
    """A test of a report's JSON as a :class:`TestResult` (fields it lacks take their defaults)."""
    return TestResult(**{key: test[key] for key in TestResult.__dataclass_fields__ if key in test})


def refreshed(data: dict[str, Any]) -> dict[str, Any]:
    """A report's JSON with its rule table computed again from its tests (as this version of
    :func:`rule_table` computes it); everything else as it was."""
    results = [_result_of(test) for area in data["areas"].values() for test in area["tests"]]
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
    ]
    ignored = [
        t["name"]
        for entry in data["areas"].values()
        for t in entry["tests"]
        if t["outcome"] == "failed" and t.get("ttl_ignored")
    ]
    if ignored:
        lines += [
            f"**TTL:** {len(ignored)} test(s) failed as if the implementation had no TTL: {TTL_HINT}.",
            "",
        ]
    lines += [
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
        "replayed on the counterexample; a crash counts as a wrong output); a wrong match or",
        "placement (rules 2, 3, 4, 6) shows as the emission rule of the input where it becomes",
        "visible, or as itself in the state machine, which compares the stored rows after every",
        "step when the implementation offers HistoryAccess. So while a failure was seen in an",
        "output only, the rules 2, 3, 4 and 6 that no failure names are *not isolated*: the",
        "failing output is that emission rule's, or a wrong match or placement at or before it.",
        "A failure under TTL whose expected output expiry decides breaks TTL, one right after",
        "a state move breaks the move: neither is attributed to a rule. A rule is undecided when no",
        "failure is attributed to it but a test failed without a counterexample a rule decides (a",
        "program that crashed or broke the protocol). Rule 12 (convergence) follows from rules 1-11.",
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
            numbers = ", ".join(map(str, test["rules"]))
            rules = f" (rule{'s' if len(test['rules']) > 1 else ''} {numbers}" if test["rules"] else ""
            hidden = not_isolated_from(_result_of(test))
            if hidden:
                rules += f"; not isolated from rules {', '.join(map(str, hidden))}"
            rules += ")" if rules else ""
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
                    f"To reproduce, run this in this page's directory (the input is [`{path}`]({path}), "
                    "next to this page, shown below); it prints the implementation's output next to "
                    "the model's, input by input:",
                    "",
                    "```",
                    reproduce_command(data.get("target", []), record, path, data.get("workdir")),
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


INTERPRETERS = re.compile(r"^(python[\d.]*|pypy[\d.]*|node|java|sh|bash|env|ruby|perl|uv|npx)$")


def program_name(command: str) -> str:
    """The report's default name for ``--cmd``: the program's file name without its extension,
    past an interpreter and its options (``python3 -u my_engine.py --state-dir {STATE}`` ->
    ``my_engine``; ``./engine`` -> ``engine``)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    for word in words:
        name = Path(word).name
        if word.startswith("-") or "=" in word or INTERPRETERS.match(name):
            continue
        return slug(Path(name).stem or name)
    return slug(command)


class SuiteDidNotRun(Exception):
    """pytest collected or ran none of the suite's tests (its own messages say why)."""


@dataclass(frozen=True)
class Written:
    """A report on disk: its Markdown page, its data (:func:`to_json`) and the run's collector."""

    markdown: Path
    data: dict[str, Any]
    collector: Collector


def slug(text: str) -> str:
    """``text`` as a file name: runs of other characters than letters, digits, ``_.-`` as ``-``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:80] or "report"


def write_report(
    target: Sequence[str],
    title: str,
    command: str,
    output_dir: Path,
    *,
    profile: str,
    extra: Sequence[str] = (),
    name: str | None = None,
) -> Written:
    """Run the suite with ``target`` options and write ``NAME.md``, ``NAME.json`` and each
    failure's input (``NAME.TEST.jsonl``) into ``output_dir`` (created). ``title`` heads the
    page, ``command`` is how it was made, ``name`` the file name (default: ``title``, as
    :func:`slug`). SuiteDidNotRun if no test ran; OSError if the files cannot be written."""
    collector = run_suite(target, profile, extra)
    if not collector.results:
        raise SuiteDidNotRun("the suite did not run (see the messages above)")
    data = to_json(title, command, collector, target, workdir_for(target, output_dir))
    output_dir.mkdir(parents=True, exist_ok=True)
    base = slug(name or title)  # may hold dots ("flink-2.3.0"): no with_suffix
    (output_dir / f"{base}.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    for file_name, text in counterexample_files(data, base).items():
        (output_dir / file_name).write_text(text, encoding="utf-8")
    markdown = output_dir / f"{base}.md"
    markdown.write_text(render_markdown(data, base), encoding="utf-8")
    return Written(markdown, data, collector)
