"""``upsertmat check-keys``: clean changelogs pass, each kind of violation planted once is found
with its line numbers, and a stream on which the model misses is never called clean."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from upsertmat.conformance.generators import (
    GeneratedStream,
    bare_update_streams,
    tolerated_streams,
    valid_streams,
)
from upsertmat.keycheck import KeyChecker, Report, Violation
from upsertmat.replay.jsonl import format_input_change
from upsertmat.spec import Change, Keys, ModelMaterializer, delete, insert, update_after, update_before

UPSERT = Keys(pk=(0,), upsert_key=(1,))
WHOLE = Keys(pk=(0,))


def check(keys: Keys, changes: Sequence[Change]) -> Report:
    checker = KeyChecker(keys)
    for number, change in enumerate(changes, 1):
        checker.feed(number, change)
    return checker.finish(len(changes))


def cli(tmp_path: Path, changes: Sequence[Change | str], *arguments: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "in.jsonl"
    path.write_text(
        "".join(c if isinstance(c, str) else format_input_change(c) for c in changes), encoding="utf-8"
    )
    return subprocess.run(
        [sys.executable, "-m", "upsertmat", "check-keys", *arguments, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


CLEAN = [
    insert(1, "u1", 10, "a"),
    insert(2, "u2", 10, "b"),
    update_before(1, "u1", 10, "a"),
    update_after(1, "u1", 20, "a2"),
    delete(2, "u2", 10, "b"),
]


def test_a_clean_changelog_passes(tmp_path: Path) -> None:
    done = cli(tmp_path, [*CLEAN, '{"time": 5}\n', "\n"], "--pk", "0", "--upsert-key", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "check-keys: OK: 5 change(s) in 7 line(s), no violation"


PLANTED = {  # on a sink key and an upsert key CLEAN does not use
    Violation.DIFFERS: [insert(5, "u7", 10, "a"), update_before(5, "u7", 10, "changed")],
    Violation.RETRACT_BEFORE_ADD: [update_before(5, "u7", 10, "a"), insert(5, "u7", 10, "a")],
    Violation.NEVER_ADDED: [insert(5, "u7", 10, "a"), delete(6, "u8", 10, "a")],
    Violation.NOT_UNIQUE: [insert(5, "u7", 10, "a"), insert(6, "u7", 20, "b")],
}


@pytest.mark.parametrize("kind", list(Violation), ids=[kind.value for kind in Violation])
def test_each_violation_planted_once_is_found_with_its_lines(tmp_path: Path, kind: Violation) -> None:
    changes = [*CLEAN, *PLANTED[kind]]
    report = check(UPSERT, changes)
    assert [finding.kind for finding in report.findings] == [kind]
    finding = report.findings[0]
    first, second = len(CLEAN) + 1, len(CLEAN) + 2
    assert (finding.line, finding.other_line) == {
        Violation.DIFFERS: (second, first),
        Violation.RETRACT_BEFORE_ADD: (first, second),
        Violation.NEVER_ADDED: (second, 0),
        Violation.NOT_UNIQUE: (second, first),
    }[kind]
    done = cli(tmp_path, changes, "--pk", "0", "--upsert-key", "1")
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[-1] == f"check-keys: FAIL: 1 violation(s) ({kind.value} 1) in 7 line(s)"
    assert any(line.startswith(f"{kind.value}: 1 — ") for line in lines)
    assert any(line.startswith(f"  line {finding.line}: ") for line in lines)


def test_differing_columns_are_named_with_both_values() -> None:
    report = check(UPSERT, PLANTED[Violation.DIFFERS])
    diffs = report.findings[0].diffs
    assert [(d.column, d.stored, d.retracted) for d in diffs] == [(3, "a", "changed")]
    # without an upsert key: the closest live row of the sink key is shown
    whole = check(WHOLE, [insert(1, "x", 1.5, "t1"), insert(1, "y", 9, "t0"), delete(1, "x", 1.5, "t2")])
    (finding,) = whole.findings
    assert finding.kind is Violation.DIFFERS and finding.other_line == 1
    assert [(d.column, d.stored, d.retracted) for d in finding.diffs] == [(3, "t1", "t2")]


def test_bare_updates_are_counted_not_flagged() -> None:
    report = check(
        UPSERT, [insert(1, "u1", 10, "a"), update_after(1, "u1", 20, "b"), delete(1, "u1", 20, "b")]
    )
    assert report.ok and report.bare_updates == 1


def test_json_format_and_bad_lines(tmp_path: Path) -> None:
    done = cli(tmp_path, [*CLEAN, *PLANTED[Violation.NEVER_ADDED]], "--pk", "0", "--format", "json")
    assert done.returncode == 1
    data = json.loads(done.stdout)
    assert data["counts"]["never-added"] == 1 and not data["ok"]
    assert data["examples"]["never-added"][0]["line"] == 7
    assert data["verdict"].startswith("check-keys: FAIL: 1 violation(s)")
    bad = cli(tmp_path, [CLEAN[0], '{"op": "+X", "row": [1]}\n'], "--pk", "0")
    assert bad.returncode == 1
    assert (
        bad.stderr.strip() == "upsertmat check-keys: line 2: unknown op '+X' (expected one of +I, -U, +U, -D)"
    )
    short = cli(tmp_path, [insert(1)], "--pk", "0", "--upsert-key", "1")
    assert (
        short.returncode == 1
        and "line 1: row has 1 column(s); the upsert key column 1 is missing" in short.stderr
    )


@given(st.one_of(valid_streams(), bare_update_streams()))
def test_valid_streams_are_clean(stream: GeneratedStream) -> None:
    report = check(stream.keys, stream.arrival)
    assert report.ok, report.findings


@given(tolerated_streams())
def test_a_stream_the_model_misses_on_is_never_clean(stream: GeneratedStream) -> None:
    model = ModelMaterializer(stream.keys)
    for change in stream.arrival:
        model.process(change)
    if model.retract_misses:
        assert not check(stream.keys, stream.arrival).ok
