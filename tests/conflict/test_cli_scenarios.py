"""The ON CONFLICT scenario catalogue through ``upsertmat replay`` (JSON Lines in and out) on every backend.

This is the shape an external corpus takes: a changelog with time lines, compacted at each
watermark and at the end of the input; outputs carry ``in`` = the time line's index (the number
of lines for the end of the input); ERROR stops with exit code 1 at the failing watermark.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from upsertmat.cli import main
from upsertmat.conformance.conflict.scenarios import CONFLICT_SCENARIOS, ConflictScenario
from upsertmat.errors import ExitCode
from upsertmat.spec import Change, ConflictBehavior

BEHAVIORS = [ConflictBehavior.NOTHING, ConflictBehavior.ERROR]


def line_text(line: Change | int) -> str:
    if isinstance(line, int):
        return json.dumps({"time": line})
    return json.dumps({"op": line.kind.value, "row": list(line.row)})


@pytest.mark.parametrize("backend", ["heap", "rocksdb", "lmdb"])
@pytest.mark.parametrize("behavior", BEHAVIORS, ids=[behavior.value for behavior in BEHAVIORS])
@pytest.mark.parametrize(
    "scenario", CONFLICT_SCENARIOS, ids=[scenario.name for scenario in CONFLICT_SCENARIOS]
)
def test_replay_matches_the_catalogue(
    tmp_path: Path, scenario: ConflictScenario, behavior: ConflictBehavior, backend: str
) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(line_text(line) + "\n" for line in scenario.lines), encoding="utf-8")
    keys = ["--pk", ",".join(map(str, scenario.keys.pk))]
    if scenario.keys.upsert_key:
        keys += ["--upsert-key", ",".join(map(str, scenario.keys.upsert_key))]
    setting = f"table.exec.sink.conflict-strategy={behavior.value}"
    code = main(["replay", *keys, "-q", "--backend", backend, "--set", setting, "-o", str(out), str(source)])
    expected, error_at = scenario.expected(behavior)
    assert code == (ExitCode.OK if error_at is None else ExitCode.BAD_INPUT)
    got = [json.loads(text) for text in out.read_text(encoding="utf-8").splitlines()]
    want = [{"in": index, "op": change.kind.value, "row": list(change.row)} for index, change in expected]
    assert got == want
