"""The conformance matrix: which engines and strategies pass which rule, on one page.

A *row* is one implementation under the suite — the registry's strategy/backend pairs,
``upsertmat replay`` as a program, the Java example engine, Apache Flink 2.3.0's operator per
strategy and state backend. :func:`run_row` runs ``upsertmat conformance`` for it in a process
of its own (its report lands in the reports directory: Markdown, JSON and each failure's
counterexample input); :func:`render` turns the reports into one Markdown table, a row per
implementation and a column per rule of docs/spec.md and per suite area, each cell ``pass``,
``FAIL`` (a link to the minimal counterexample in the row's report), ``n/s`` (not supported: a
numbered reason under the table) or ``not run``; :func:`matrix_json` is the same as data.
Rows that need what is not installed (PyFlink, a JDK) are left out of a run; a row not rerun
keeps the result (and the date and versions) of its last run, read from the matrix's JSON.
Cost: one suite run per row (minutes for a Flink row; see docs/conformance.md).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...impls.build import needs_extra
from ..mismatch import RULES
from . import report
from .report import anchor

FLINK_VERSION = "2.3.0"
FLINK_STRATEGIES = ("LEGACY", "VALUE", "MAP", "ADAPTIVE")
FLINK_BACKENDS = ("hashmap", "rocksdb")
JAVA_SOURCE = Path("examples") / "java" / "UpsertMaterializer.java"
JAVA_CLASSES = Path("build") / "java-example"

COLUMNS: tuple[tuple[str, str], ...] = (
    *((f"rule-{rule}", str(rule)) for rule in RULES),
    ("test_scenario", "scenarios"),
    ("test_pinned_streams", "pinned"),
    ("test_valid_streams", "valid streams"),
    ("test_bare_update_streams", "bare +U"),
    ("test_tolerated_streams", "tolerated"),
    ("test_long_histories", "long histories"),
    ("test_state_machine", "state machine"),
    ("test_ttl_scenario", "TTL scenarios"),
    ("test_ttl_streams", "TTL streams"),
    ("test_ttl_state_machine", "TTL machine"),
    ("test_lifecycle_state_machine", "lifecycle"),
)
"""(key, heading): rules 1-11, then the suite's test functions (areas; TTL streams as one)."""


@dataclass(frozen=True)
class Row:
    """One implementation of the matrix: its report name, how the suite targets it, and what
    it needs installed (``flink``, ``java`` or nothing)."""

    name: str
    title: str
    group: str
    target: tuple[str, ...]
    profile: str = "upsertmat-ci"
    scale: float = 1.0
    """``UPSERTMAT_EXAMPLES_SCALE`` of the run: the profile's example counts times this."""
    needs: str = ""
    note: str = ""

    @property
    def examples(self) -> str:
        """The profile, and the scale when it is not 1 (``upsertmat-ci x 0.25``)."""
        return self.profile if self.scale == 1 else f"{self.profile} x {self.scale:g}"

    def command(self, reports: Path, keyword: str | None) -> list[str]:
        """The ``upsertmat conformance`` command line that runs this row."""
        words = [
            "upsertmat",
            "conformance",
            "--name",
            self.name,
            "-o",
            str(reports),
            "--profile",
            self.profile,
        ]
        for option in self.target:
            name, _, value = option.partition("=")
            words += {
                "--upsertmat-impl": ["--impl", value],
                "--upsertmat-cmd": ["--cmd", value],
                "--upsertmat-ttl-granularity": ["--ttl-granularity", value],
                "--upsertmat-scenarios-in-session": ["--scenarios-in-session"],
            }[name]
        return [*words, *(["-k", keyword] if keyword else [])]


def rows() -> list[Row]:
    """Every row, in the matrix's order."""
    from ...impls import implementation_names

    built = [
        Row(name.replace("/", "-"), name, "upsertmat (Python implementations)", (f"--upsertmat-impl={name}",))
        for name in implementation_names()
    ]
    built.append(
        Row(
            "upsertmat-replay",
            "`upsertmat replay` (LEGACY/heap, a program)",
            "programs (process protocol)",
            (
                "--upsertmat-cmd=upsertmat replay --state-dir {STATE} --stream-line {FIRST_LINE}",
                "--upsertmat-ttl-granularity=per_key",
            ),
        )
    )
    built.append(
        Row(
            "java-example",
            "Java example engine (`examples/java`)",
            "programs (process protocol)",
            (f"--upsertmat-cmd=java -cp {JAVA_CLASSES} UpsertMaterializer",),
            needs="java",
        )
    )
    for backend in FLINK_BACKENDS:
        for strategy in FLINK_STRATEGIES:
            command = f"upsertmat conformance-flink --strategy {strategy} --backend {backend}"
            note = ""
            if strategy == "ADAPTIVE":
                command += " --threshold-high 3 --threshold-low 1"
                note = "thresholds 3/1, so keys switch to MAP within the generated streams"
            built.append(
                Row(
                    f"flink-{FLINK_VERSION}-{strategy}-{backend}",
                    f"Flink {FLINK_VERSION} {strategy} / {backend}",
                    f"Apache Flink {FLINK_VERSION} (SinkUpsertMaterializer, real operator)",
                    (f"--upsertmat-cmd={command}", "--upsertmat-scenarios-in-session"),
                    # derandomized (a rerun draws the same streams), a quarter of the examples:
                    # each stream is a Flink job of seconds
                    scale=0.25,
                    needs="flink",
                    note=note,
                )
            )
    return built


def missing(row: Row, root: Path) -> str | None:
    """Why ``row`` cannot run here, or None."""
    if row.needs == "flink" and importlib.util.find_spec("pyflink") is None:
        return f"PyFlink is not installed (the row {needs_extra('flink')})"
    if row.needs == "java":
        if shutil.which("javac") is None or shutil.which("java") is None:
            return "no JDK (java and javac) on PATH"
        if not (root / JAVA_SOURCE).is_file():
            return f"{JAVA_SOURCE} not found under {root} (run from a clone)"
    return None


def prepare(row: Row, root: Path) -> None:
    """What a row needs before its run: the Java example compiled into :data:`JAVA_CLASSES`."""
    if row.needs == "java":
        done = subprocess.run(
            ["javac", "-d", str(JAVA_CLASSES), str(JAVA_SOURCE)], cwd=root, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise RuntimeError(f"{row.name}: javac failed: {done.stderr.strip()}")


def environment(row: Row) -> dict[str, str]:
    """The environment of a row's run: this interpreter's scripts first on PATH, so ``python``
    and ``upsertmat`` in the rows' commands are the ones of this installation, the
    installation's package imported, not the folder of a clone it runs in, and the row's
    example scale."""
    env = dict(os.environ)
    env["UPSERTMAT_EXAMPLES_SCALE"] = f"{row.scale:g}"
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    # A clone's upsertmat/ folder in the working directory must not shadow the installed package
    # (``python -m`` puts the working directory first on sys.path otherwise).
    env["PYTHONSAFEPATH"] = "1"
    return env


def run_row(row: Row, root: Path, reports: Path, keyword: str | None = None) -> dict[str, Any]:
    """Run the suite for ``row`` (its report written to ``reports``); the row's run record."""
    prepare(row, root)
    started = time.monotonic()
    done = subprocess.run(
        row.command(reports, keyword),
        cwd=root,
        env=environment(row),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1) or not (reports / f"{row.name}.json").is_file():
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{row.name}: upsertmat conformance exited with {done.returncode}:\n{tail}")
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "seconds": round(time.monotonic() - started),
        "keyword": keyword,
        "versions": versions(row),
    }


def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def versions(row: Row | None = None) -> dict[str, str | None]:
    """What a result depends on: upsertmat (and its commit, in a git checkout), Python, the
    suite's libraries, and the engine of ``row`` (Java, PyFlink)."""
    found: dict[str, str | None] = {
        "upsertmat": _version("upsertmat"),
        "python": platform.python_version(),
        "hypothesis": _version("hypothesis"),
        "pytest": _version("pytest"),
    }
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        found["commit"] = commit or None
    except (OSError, subprocess.CalledProcessError):
        found["commit"] = None
    if row is not None and row.needs in ("java", "flink"):
        try:
            text = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
            found["java"] = text.splitlines()[0] if text else None
        except OSError:
            found["java"] = None
    if row is not None and row.needs == "flink":
        found["apache-flink"] = _version("apache-flink")
    if row is not None and row.group.startswith("upsertmat"):
        found["rocksdict"], found["lmdb"] = _version("rocksdict"), _version("lmdb")
    return found


def _area_of(test: str) -> str:
    """The column key of a suite test (``test_ttl_streams[...]`` -> ``test_ttl_streams``)."""
    return test.split("[", 1)[0]


_REFUSED = re.compile(r"^the program refused (.*?): (.*)$", re.S)
_SET = re.compile(r"\s*(--set\s+)?[\w.-]+=\S+")
OTHER_GRANULARITY = "a per_"


def reason_text(reason: str) -> str:
    """A skip reason with the run-specific parts taken out, so that one refusal reads the same
    for every TTL configuration (the flags the suite passed, and ``KEY=VALUE`` settings the
    program quoted back)."""
    refused = _REFUSED.match(reason)
    if refused is None:
        return reason
    answer = _SET.sub("", refused.group(2)).strip().rstrip(":").strip()
    return f"the program exits with code 2 (not supported) on TTL settings: {answer}"


def cells(report: dict[str, Any], reasons: list[str]) -> dict[str, dict[str, Any]]:
    """The row's cells from its conformance report; skip reasons are appended to ``reasons``
    (shared by the page, numbered from 1) and cited by number."""
    tests = [test for area in report["areas"].values() for test in area["tests"]]
    result: dict[str, dict[str, Any]] = {}
    for rule, entry in report["rules"].items():
        # "not isolated" (a failure seen in an output could be this rule's) links it like "undecided"
        status = {"pass": "pass", "FAIL": "FAIL", "undecided": "?", "not isolated": "?"}.get(
            entry["status"], "not run"
        )
        cell: dict[str, Any] = {"status": status}
        if entry["failing_tests"] and status in ("FAIL", "?"):
            cell["test"] = entry["failing_tests"][0]
        result[f"rule-{rule}"] = cell
    for key, _ in COLUMNS:
        if key.startswith("rule-"):
            continue
        members = [test for test in tests if _area_of(test["name"]) == key]
        outcomes = {test["outcome"] for test in members}
        if not members:
            result[key] = {"status": "not run"}
        elif "failed" in outcomes:
            failing = next(test for test in members if test["outcome"] == "failed")
            result[key] = {"status": "FAIL", "test": failing["name"]}
        elif "passed" in outcomes:
            result[key] = {"status": "pass"}
        else:
            why = sorted({reason_text(test["reason"]) for test in members if test["reason"]})
            if any(not reason.startswith(OTHER_GRANULARITY) for reason in why):
                why = [reason for reason in why if not reason.startswith(OTHER_GRANULARITY)]
            numbers = []
            for reason in why:
                if reason not in reasons:
                    reasons.append(reason)
                numbers.append(reasons.index(reason) + 1)
            result[key] = {"status": "n/s", "reasons": numbers}
    return result


def matrix_json(
    all_rows: Sequence[Row], reports: Path, runs: dict[str, dict[str, Any]], shown: str
) -> dict[str, Any]:
    """The matrix as data: per row its report's summary and cells, and its run record
    (``shown``: the reports directory as the page names it, for the rows' commands)."""
    reasons: list[str] = []
    entries = []
    for row in all_rows:
        path = reports / f"{row.name}.json"
        entry: dict[str, Any] = {
            "name": row.name,
            "title": row.title,
            "group": row.group,
            "note": row.note,
            "command": (f"UPSERTMAT_EXAMPLES_SCALE={row.scale:g} " if row.scale != 1 else "")
            + shlex.join(row.command(Path(shown), None)),
            "profile": row.examples,
            "run": runs.get(row.name),
        }
        if path.is_file() and row.name in runs:
            report = json.loads(path.read_text(encoding="utf-8"))
            entry["summary"] = report["summary"]
            entry["cells"] = cells(report, reasons)
        entries.append(entry)
    return {"generated": datetime.now(UTC).strftime("%Y-%m-%d"), "rows": entries, "reasons": reasons}


def _cell_text(row: dict[str, Any], key: str, reports: str) -> str:
    cell = row.get("cells", {}).get(key)
    if cell is None:
        return "not run"
    if cell["status"] in ("FAIL", "?"):
        return f"[**{cell['status']}**]({reports}/{row['name']}.md#{anchor(cell['test'])})"
    if cell["status"] == "n/s":
        return "n/s " + ",".join(f"[{n}]" for n in cell["reasons"])
    return str(cell["status"])


def render(data: dict[str, Any], reports: str) -> str:
    """The Markdown page (``reports``: the reports directory, relative to the page)."""
    lines = [
        "# Conformance matrix",
        "",
        "<!-- Generated by `upsertmat conformance-matrix`; do not edit by hand. -->",
        "",
        "Which implementation passes which rule of the specification ([spec.md](spec.md)) and which area",
        "of the conformance suite ([conformance.md](conformance.md)). One row per implementation, one",
        "column per rule (1-11) and per suite area; a cell is `pass`, **FAIL** (linking the minimal",
        "counterexample in the row's report, with the input and the command that replays it), `n/s`",
        "(not supported: the numbered reasons below the table) or `not run`. A rule fails when it decides",
        "the expected output of a minimal failing input; it is **?** (linking the failure) when no",
        "failure is attributed to it but a test failed without a counterexample a rule decides (the",
        "engine crashed), or when a failure seen in an output only could be a wrong match or placement",
        "(rules 2, 3, 4, 6: not isolated). Regenerate with `upsertmat conformance-matrix`",
        '(docs/conformance.md, "The conformance matrix").',
        "",
        f"Page generated {data['generated']}.",
        "",
    ]
    headings = [heading for _, heading in COLUMNS]
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in data["rows"]:
        groups.setdefault(row["group"], []).append(row)
    for group, members in groups.items():
        lines += [
            f"## {group}",
            "",
            "| implementation | " + " | ".join(headings) + " | result |",
            "|---" * (len(headings) + 2) + "|",
        ]
        for row in members:
            summary = row.get("summary")
            result = (
                f"[{summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped]"
                f"({reports}/{row['name']}.md)"
                if summary
                else "not run"
            )
            cells_text = [_cell_text(row, key, reports) for key, _ in COLUMNS]
            lines.append(f"| {row['title']} | " + " | ".join(cells_text) + f" | {result} |")
        lines.append("")
    lines += ["## Not supported: the reasons", ""]
    lines += [f"{number}. {reason}" for number, reason in enumerate(data["reasons"], 1)] or ["(none)"]
    lines += ["", "## How each row was run", ""]
    lines += [
        "| implementation | command | profile | date | time | versions | note |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in data["rows"]:
        run = row.get("run")
        if run is None:
            lines.append(
                f"| {row['title']} | `{row['command']}` | `{row['profile']}` | not run | | | {row['note']} |"
            )
            continue
        shown = ", ".join(f"{name} {value}" for name, value in run["versions"].items() if value)
        subset = f" (`-k {run['keyword']}`)" if run.get("keyword") else ""
        lines.append(
            f"| {row['title']} | `{row['command']}`{subset} | `{row['profile']}` | {run['date']} | "
            f"{run['seconds']} s | {shown} | {row['note']} |"
        )
    return "\n".join(lines).rstrip() + "\n"


PAGE = "conformance-matrix.md"
DATA = "conformance-matrix.json"


def previous_runs(path: Path) -> dict[str, dict[str, Any]]:
    """The run records of the matrix's last JSON (empty if there is none or it is unreadable)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {row["name"]: row["run"] for row in data["rows"] if row.get("run")}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def refresh_reports(reports: Path, names: list[str]) -> None:
    """Render each row's report page again from its JSON with this version's rule table and
    page layout, so that every page the matrix links to reads alike."""
    for name in names:
        path = reports / f"{name}.json"
        if path.is_file():
            data = report.refreshed(json.loads(path.read_text(encoding="utf-8")))
            path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            (reports / f"{name}.md").write_text(report.render_markdown(data, name), encoding="utf-8")


def write_page(docs: Path, reports: Path, all_rows: list[Row], runs: dict[str, dict[str, Any]]) -> Path:
    """The reports of the rows run, rendered again, and ``DOCS/conformance-matrix.md`` and
    ``.json`` from every row's latest report; the page's path. OSError if a file cannot be
    written (ValueError or KeyError: a report's JSON is not one)."""
    refresh_reports(reports, [row.name for row in all_rows if row.name in runs])
    shown = os.path.relpath(reports, docs)
    # The rows' commands run from the folder holding the docs (a clone's root), so they read the
    # same whichever folder the matrix was written from: a regenerated page equals the committed.
    data = matrix_json(all_rows, reports, runs, os.path.relpath(reports, docs.resolve().parent))
    (docs / DATA).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    (docs / PAGE).write_text(render(data, shown), encoding="utf-8")
    return docs / PAGE


def run_matrix(
    selected: list[Row],
    root: Path,
    docs: Path,
    reports: Path,
    *,
    keyword: str | None = None,
    log: Callable[[str], None] = lambda _line: None,
) -> int:
    """Run each of ``selected`` that can run here (:func:`run_row`), writing the page after
    every row (an interrupted run keeps what it did) and once more at the end; rows not run
    keep their last result. ``log`` sees a line per row. The number of rows whose run broke."""
    docs.mkdir(parents=True, exist_ok=True)
    reports.mkdir(parents=True, exist_ok=True)
    all_rows = rows()
    runs = previous_runs(docs / DATA)
    broken = 0
    for number, row in enumerate(selected, 1):
        why = missing(row, root)
        prefix = f"[{number}/{len(selected)}] {row.name}"
        if why is not None:
            log(f"{prefix}: left out: {why}")
            continue
        log(f"{prefix}: running ({row.profile})")
        try:
            runs[row.name] = run_row(row, root, reports, keyword)
        except (RuntimeError, OSError) as error:
            broken += 1
            log(f"{prefix}: {error}")
            continue
        summary = json.loads((reports / f"{row.name}.json").read_text(encoding="utf-8"))["summary"]
        log(
            f"{prefix}: {summary['passed']} passed, {summary['failed']} failed, {summary['skipped']} skipped "
            f"({runs[row.name]['seconds']} s)"
        )
        write_page(docs, reports, all_rows, runs)
    write_page(docs, reports, all_rows, runs)
    return broken


def findings(docs: Path, reports: Path | None = None) -> dict[str, Any]:
    """What the matrix in ``docs`` found, without when, where and with which versions it ran:
    per row its entry of the matrix's JSON but the run record (cells, summary, command,
    profile) and its report's JSON but ``workdir`` (where it was written from), and the
    numbered reasons. The profile is derandomized, so two runs of the same code and versions
    find the same; ``reports`` defaults to ``DOCS/conformance-reports``. OSError, ValueError or
    KeyError if a file is missing or not the matrix's."""
    reports = reports if reports is not None else docs / "conformance-reports"
    data = json.loads((docs / DATA).read_text(encoding="utf-8"))
    found: dict[str, Any] = {}
    for row in data["rows"]:
        entry = {key: value for key, value in row.items() if key != "run"}
        path = reports / f"{row['name']}.json"
        if "cells" in row and path.is_file():
            entry["report"] = {
                key: value
                for key, value in json.loads(path.read_text(encoding="utf-8")).items()
                if key != "workdir"
            }
        found[row["name"]] = entry
    return {"rows": found, "reasons": data["reasons"]}


def differences(before: Any, after: Any, path: str = "") -> list[str]:
    """Where two :func:`findings` (or any JSON values) differ, one line per differing leaf:
    ``PATH: BEFORE -> AFTER`` (``PATH`` the keys and list positions from the top, e.g.
    ``rows.flink-2.3.0-MAP-hashmap.cells.rule-9.status: 'pass' -> 'FAIL'``); [] when equal.
    O(size of both)."""
    if isinstance(before, dict) and isinstance(after, dict):
        lines = []
        for key in [*before, *(key for key in after if key not in before)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in after:
                lines.append(f"{where}: only before")
            elif key not in before:
                lines.append(f"{where}: only after")
            else:
                lines += differences(before[key], after[key], where)
        return lines
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        pairs = enumerate(zip(before, after, strict=True))
        return [line for i, (one, other) in pairs for line in differences(one, other, f"{path}[{i}]")]
    if before == after:
        return []

    def short(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 120 else text[:117] + "..."

    return [f"{path}: {short(before)} -> {short(after)}"]
