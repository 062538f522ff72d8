"""Crash recovery of ``upsertmat replay`` under ON CONFLICT DO NOTHING on the byte backends.

A run on a state directory is SIGKILLed when its output reaches a random size, restarted with
the same input and ``-o`` file, and so on; the final output must equal an uninterrupted run
byte for byte: the pending changes, the last watermark and the replay position are committed
together per line, so no watermark's output is lost or repeated.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from pathlib import Path

import pytest

from ..lifecycle.processes import run_and_kill, run_to_end

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))


def stream_text(seed: int, length: int) -> str:
    """Retract-style updates (a few bare), stray retractions, 12 keys; a watermark every 20 changes."""
    rnd = random.Random(seed)
    live: dict[int, list[object]] = {}
    lines: list[dict[str, object]] = []
    for step in range(length):
        if step % 20 == 0:
            lines.append({"time": step})
        key = rnd.randrange(12)
        old = live.get(key)
        if old is not None and rnd.random() < 0.97:  # else two live rows: NOTHING keeps the current one
            lines.append({"op": "-U", "row": old})
        elif rnd.random() < 0.05:
            lines.append({"op": "-D", "row": [key, 9, "never"]})
        row = [key, step, f"v{step % 3}"]
        lines.append({"op": "+U" if old else "+I", "row": row})
        live[key] = row
    return "".join(json.dumps(line) + "\n" for line in lines)


def replay_args(backend: str, state: Path, source: Path, output: Path) -> list[str]:
    return [SCRIPT, "replay", "--pk", "0", "-q", "--backend", backend,
            "--set", "table.exec.sink.conflict-strategy=NOTHING",
            "--state-dir", str(state), "-o", str(output), str(source)]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["rocksdb", "lmdb"])
def test_killed_runs_resume_to_exactly_the_uninterrupted_output(tmp_path: Path, backend: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(stream_text(3, 2500))
    reference = tmp_path / "reference.jsonl"
    run_to_end(replay_args(backend, tmp_path / "reference-state", source, reference))
    expected = reference.read_bytes()
    assert expected.count(b"\n") > 100
    rnd = random.Random(3)
    output = tmp_path / "out.jsonl"
    kills = 0
    for _ in range(4):
        if run_and_kill(
            replay_args(backend, tmp_path / "state", source, output), output, rnd.randrange(len(expected))
        ):
            kills += 1
    run_to_end(replay_args(backend, tmp_path / "state", source, output))
    assert kills >= 2, "the kills did not land mid-stream; the test would prove little"
    assert output.read_bytes() == expected
