"""Crash recovery: SIGKILL real ``upsertmat replay`` processes at random points and resume.

Each scenario kills a run on a state directory when its output file has reached a random
size (so the kill lands mid-stream), restarts it with the same input and ``-o`` file, and
repeats; the final output must equal an uninterrupted run byte for byte (no lost and no
repeated change). The split variant spreads the stream over several runs (each killed once)
and concatenates their outputs.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
import sys
from pathlib import Path

import pytest

from upsertmat.impls import available
from upsertmat.impls.settings import Backend, Strategy

from .processes import run_and_kill, run_to_end
from .support import UPSERT_KEY, mixed_stream

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
CONFIGS = {
    "heap": ["--strategy", "MAP", "--backend", "heap", "--checkpoint-every", "7"],
    "rocksdb": ["--strategy", "ADAPTIVE", "--backend", "rocksdb"],
    "lmdb": ["--strategy", "SORTED", "--backend", "lmdb"],
    "legacy-rocksdb": ["--strategy", "LEGACY", "--backend", "rocksdb"],
}
PRESENT = {backend.value for _, backend in available()} | {"heap"}
CONFIG_IDS = [name for name in CONFIGS if name.split("-")[-1] in PRESENT]
assert (Strategy.LEGACY, Backend.HEAP) in available()


def stream_lines(seed: int, length: int) -> list[str]:
    """A changelog with upsert key, interleaved with clock advances."""
    lines = []
    for position, change in enumerate(mixed_stream(seed, length, UPSERT_KEY, pks=12)):
        if position % 50 == 0:
            lines.append(json.dumps({"time": position}) + "\n")
        lines.append(json.dumps({"op": change.kind.value, "row": list(change.row)}) + "\n")
    return lines


def replay_args(config: str, state: Path, source: Path, output: Path) -> list[str]:
    return [SCRIPT, "replay", "--pk", "0", "--upsert-key", "1", "-q", *CONFIGS[config],
            "--state-dir", str(state), "-o", str(output), str(source)]  # fmt: skip


def uninterrupted(tmp_path: Path, config: str, source: Path) -> bytes:
    output = tmp_path / "reference.jsonl"
    run_to_end(replay_args(config, tmp_path / "reference-state", source, output))
    return output.read_bytes()


@pytest.mark.parametrize("config", CONFIG_IDS)
@pytest.mark.parametrize("seed", [1, 2])
def test_killed_runs_resume_to_exactly_the_uninterrupted_output(
    tmp_path: Path, config: str, seed: int
) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(stream_lines(seed, 1500)))
    expected = uninterrupted(tmp_path, config, source)
    rnd = random.Random(seed)
    output = tmp_path / "out.jsonl"
    kills = 0
    for _ in range(4):
        if run_and_kill(
            replay_args(config, tmp_path / "state", source, output), output, rnd.randrange(len(expected))
        ):
            kills += 1
    run_to_end(replay_args(config, tmp_path / "state", source, output))
    assert kills >= 2, "the kills did not land mid-stream; the test would prove little"
    assert output.read_bytes() == expected
    manifest = json.loads((tmp_path / "state" / "manifest.json").read_text())
    assert (manifest["in_progress"], manifest["lines"]) == (False, source.read_text().count("\n"))


@pytest.mark.parametrize("config", CONFIG_IDS)
def test_a_stream_split_over_runs_with_kills_in_between_equals_one_run(tmp_path: Path, config: str) -> None:
    lines = stream_lines(7, 1200)
    whole = tmp_path / "whole.jsonl"
    whole.write_text("".join(lines))
    expected = uninterrupted(tmp_path, config, whole)
    rnd = random.Random(7)
    cuts = [0, 300, 301, 800, len(lines)]
    combined = b""
    for part, (start, stop) in enumerate(itertools.pairwise(cuts)):
        source, output = tmp_path / f"part{part}.jsonl", tmp_path / f"out{part}.jsonl"
        source.write_text("".join(lines[start:stop]))
        args = replay_args(config, tmp_path / "state", source, output)
        if stop - start > 1:
            run_and_kill(args, output, rnd.randrange(1, 2000))
        run_to_end(args)
        combined += output.read_bytes()
    assert combined == expected
