"""``upsertmat replay`` at bad input: ``--on-error fail`` stops at the line and keeps what came before,
``skip`` writes dead letters and goes on; missing key columns and a given arity."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from upsertmat.errors import ExitCode

from ..conftest import Cli
from .support import (
    GOOD,
    change,
    lines,
)


def test_fail_stops_at_the_bad_line_and_keeps_everything_before_it(cli: Cli, tmp_path: Path) -> None:
    stream = lines(*GOOD[:2]) + '{"op": "+X", "row": [3, "c"]}\n' + lines(GOOD[2])
    result = cli("replay", "--pk", "0", "--state-dir", tmp_path / "st", "-o", tmp_path / "out", stdin=stream)
    assert result.code == ExitCode.BAD_INPUT
    assert result.err.splitlines()[0] == (
        "upsertmat replay: line 3: unknown op '+X' (expected one of +I, -U, +U, -D)"
    )
    assert "stopped at line 3 (lines count from 1" in result.err
    assert f"state saved in {tmp_path / 'st'}, its next line is in=2" in result.err
    assert (tmp_path / "out").read_text() == (
        '{"in": 0, "op": "+I", "row": [1, "a"]}\n{"in": 1, "op": "+I", "row": [2, "b"]}\n'
    )
    # going on from the (fixed) bad line continues exactly where one good run would be
    rest = cli(
        "replay",
        "--pk",
        "0",
        "--state-dir",
        tmp_path / "st",
        "--stream-line",
        "2",
        stdin=lines(change("+I", 3, "c"), GOOD[2]),
    )
    assert rest.code == 0
    whole = cli("replay", "--pk", "0", stdin=lines(*GOOD[:2], change("+I", 3, "c"), GOOD[2]))
    assert (tmp_path / "out").read_text() + rest.out == whole.out


def test_skip_writes_bad_lines_to_the_dead_letter_file_and_goes_on(cli: Cli, tmp_path: Path) -> None:
    stream = (
        lines(GOOD[0])
        + "not json\n"
        + lines(change("+I", 2))  # wrong arity (2 columns fixed by the first change)
        + "\n"
        + lines(change("+I", 2, "b"), {"op": "+I", "row": [3, "c"], "time": 1}, GOOD[2])
    )
    dead = tmp_path / "dead.jsonl"
    result = cli("replay", "--pk", "0", "--on-error", "skip", "--dead-letter", dead, stdin=stream)
    assert result.code == 0
    assert [(r["in"], r["op"]) for r in result.records] == [(0, "+I"), (4, "+I"), (6, "-D")]
    assert [json.loads(line) for line in dead.read_text().splitlines()] == [
        {"line": 2, "in": 1, "error": "invalid JSON: Expecting value (column 1)", "text": "not json"},
        {
            "line": 3,
            "in": 2,
            "error": "row has 1 column(s), expected 2 (the stream's arity)",
            "text": '{"op": "+I", "row": [2]}',
        },
        {
            "line": 6,
            "in": 5,
            "error": "a line is either a change ('op') or a clock advance ('time'), not both",
            "text": '{"op": "+I", "row": [3, "c"], "time": 1}',
        },
    ]
    assert "upsertmat replay: line 2: invalid JSON: Expecting value (column 1) (skipped)" in result.err
    assert f"skipped 3 bad line(s); they are in {dead}" in result.err
    cli("replay", "--pk", "0", "--on-error", "skip", "--dead-letter", dead, stdin="oops\n")
    assert len(dead.read_text().splitlines()) == 4  # appended, never truncated


def test_dead_letter_defaults(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cli("replay", "--pk", "0", "--on-error", "skip", stdin="oops\n")
    assert json.loads((tmp_path / "upsertmat-dead-letter.jsonl").read_text())["text"] == "oops"
    cli("replay", "--pk", "0", "--on-error", "skip", "--state-dir", "st", stdin="\noops\n")
    assert json.loads((tmp_path / "st" / "dead-letter.jsonl").read_text())["line"] == 2
    clean = cli("replay", "--pk", "0", "--on-error", "skip", "--state-dir", "st2", stdin=lines(GOOD[0]))
    assert (clean.code, clean.err) == (0, "")
    assert not (tmp_path / "st2" / "dead-letter.jsonl").exists()  # created only when needed


def test_a_key_column_missing_is_bad_input(cli: Cli) -> None:
    result = cli("replay", "--pk", "0", "--upsert-key", "2", stdin=lines(change("+I", 1, "a")))
    assert result.code == ExitCode.BAD_INPUT
    assert (
        "line 1: row has 2 column(s); the upsert key column 2 is missing (columns count from 0)" in result.err
    )


def test_a_given_arity_is_enforced_from_the_first_line(cli: Cli) -> None:
    result = cli("replay", "--pk", "0", "--arity", "3", stdin=lines(change("+I", 1, "a")))
    assert result.code == ExitCode.BAD_INPUT
    assert "line 1: row has 2 column(s), expected 3" in result.err


# -- state directory -----------------------------------------------------------------------------
