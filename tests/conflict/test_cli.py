"""``upsertmat replay`` with ``table.exec.sink.conflict-strategy`` = ERROR | NOTHING, in process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from upsertmat.cli import main
from upsertmat.errors import ExitCode

BACKENDS = ["heap", "rocksdb", "lmdb"]
KEY = "table.exec.sink.conflict-strategy"
LINES = [
    {"op": "+I", "row": [1, 10, "a"]},
    {"op": "-U", "row": [1, 10, "a"]},
    {"op": "+U", "row": [1, 20, "b"]},
    {"op": "+I", "row": [2, 10, "a"]},
    {"time": 5},
    {"op": "+I", "row": [2, 20, "b"]},
    {"op": "-D", "row": [1, 20, "b"]},
    {"time": 6},
    {"op": "+I", "row": [3, 1, "x"]},
]
BEFORE_CONFLICT = [
    {"in": 4, "op": "+I", "row": [1, 20, "b"]},
    {"in": 4, "op": "+I", "row": [2, 10, "a"]},
]
AFTER_CONFLICT = [
    {"in": 7, "op": "-D", "row": [1, 20, "b"]},
    {"in": 9, "op": "+I", "row": [3, 1, "x"]},  # the end of the input is the final watermark
]


def replay(tmp_path: Path, *args: str) -> tuple[int, list[object], str]:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in LINES), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    code = main(["replay", "--pk", "0", "-o", str(out), *args, str(source)])
    lines = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    return code, lines, ""


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_emits_at_watermarks_and_at_the_end(tmp_path: Path, backend: str) -> None:
    code, out, _ = replay(tmp_path, "--backend", backend, "--set", f"{KEY}=NOTHING")
    assert code == ExitCode.OK
    assert out == BEFORE_CONFLICT + AFTER_CONFLICT


@pytest.mark.parametrize("backend", BACKENDS)
def test_error_stops_with_exit_1_naming_the_key_and_rows(
    tmp_path: Path, backend: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = replay(tmp_path, "--backend", backend, "--set", f"{KEY}=ERROR")
    assert code == ExitCode.BAD_INPUT
    assert out == BEFORE_CONFLICT
    err = capsys.readouterr().err
    assert "line 8: Primary key constraint violation: sink key [2] has 2 live rows" in err
    assert "[2, 10, 'a'], [2, 20, 'b']" in err


def test_error_with_skip_dead_letters_the_conflict_and_keeps_the_current_row(tmp_path: Path) -> None:
    dead = tmp_path / "dead.jsonl"
    code, out, _ = replay(tmp_path, "--set", f"{KEY}=ERROR", "--on-error", "skip", "--dead-letter", str(dead))
    assert code == ExitCode.OK
    assert out == BEFORE_CONFLICT + AFTER_CONFLICT
    (record,) = [json.loads(line) for line in dead.read_text(encoding="utf-8").splitlines()]
    assert record["line"] == 8 and record["in"] == 7 and record["text"] == '{"time": 6}'
    assert "sink key [2]" in record["error"] and "the current row is kept" in record["error"]


def test_a_conflict_at_the_end_of_the_input_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text('{"op": "+I", "row": [1, 1]}\n{"op": "+I", "row": [1, 2]}\n', encoding="utf-8")
    code = main(["replay", "--pk", "0", "--set", f"{KEY}=ERROR", str(source)])
    assert code == ExitCode.BAD_INPUT
    assert "at the end of the input (the final watermark): Primary key constraint violation" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_a_split_stream_on_a_state_dir_is_compacted_at_its_time_lines(tmp_path: Path, backend: str) -> None:
    state = tmp_path / "state"
    outputs = []
    for number, part in enumerate((LINES[:6], LINES[6:])):
        source = tmp_path / f"part{number}.jsonl"
        source.write_text("".join(json.dumps(line) + "\n" for line in part), encoding="utf-8")
        out = tmp_path / f"out{number}.jsonl"
        args = ["replay", "--pk", "0", "--backend", backend, "--set", f"{KEY}=NOTHING"]
        assert main([*args, "--state-dir", str(state), "-o", str(out), str(source)]) == ExitCode.OK
        outputs += [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    # No end-of-input watermark with --state-dir: the stream goes on; the last +I stays pending.
    assert outputs == [*BEFORE_CONFLICT, AFTER_CONFLICT[0]]


def test_savepoint_of_a_conflict_state_directory_is_refused_with_what_to_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    code, _, _ = replay(
        tmp_path, "--backend", "rocksdb", "--set", f"{KEY}=NOTHING", "--state-dir", str(state)
    )
    assert code == ExitCode.OK
    capsys.readouterr()
    assert main(["savepoint", "--state-dir", str(state), "-o", str(tmp_path / "sp")]) == ExitCode.USAGE
    error = capsys.readouterr().err
    assert "holds ON CONFLICT DO NOTHING state" in error and "upsertmat.impls.conflict.savepoint" in error
    assert not (tmp_path / "sp").exists()
