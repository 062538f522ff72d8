"""The kill campaign: SIGKILL ``upsertmat replay`` at random instants and rerun the same command.

Each round starts the same command and kills it after a random delay drawn from zero to a bit
more than an uninterrupted run takes, so kills land during start-up, mid-stream, right after
the final commit and during shutdown alike; then it reruns the same command until one exits 0.
The output file and the dead-letter file must equal those of an uninterrupted run byte for
byte, the ``--misses`` file record for record up to what a record says about the process that
wrote it (with TTL, ``expired`` counts the expiry removals *this process* saw, so ``cause`` says
``expired`` or ``never_added`` for a key that holds no row depending on where the run resumed:
docs/cli.md, "Misses"), and one more rerun must change nothing ("already applied").

Bounded for CI: ``UPSERTMAT_KILLS`` kill rounds per configuration (default 6). The longer
setting reported in docs/operations.md is ``UPSERTMAT_KILLS=100``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .support import UPSERT_KEY, mixed_stream

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
KILLS = int(os.environ.get("UPSERTMAT_KILLS", "6"))

CONFIGS = {
    "heap-uk": ["--strategy", "MAP", "--backend", "heap", "--upsert-key", "1", "--checkpoint-every", "97"],
    "heap-row-ttl": ["--strategy", "VALUE", "--backend", "heap", "--checkpoint-every", "50", "--ttl", "40"],
    "rocksdb-uk": ["--strategy", "MAP", "--backend", "rocksdb", "--upsert-key", "1",
                   "--checkpoint-every", "64"],
    "rocksdb-row-ttl": ["--strategy", "ADAPTIVE", "--backend", "rocksdb", "--ttl", "40"],
    "lmdb-uk-ttl": ["--strategy", "SORTED", "--backend", "lmdb", "--upsert-key", "1", "--ttl", "40",
                    "--checkpoint-every", "13"],
    "lmdb-row": ["--strategy", "LEGACY", "--backend", "lmdb", "--checkpoint-every", "1"],
}  # fmt: skip


def source_lines(seed: int, length: int) -> list[str]:
    """Changes with clock lines and a few bad lines (they go to the dead-letter file)."""
    rnd = random.Random(seed)
    lines = []
    for position, change in enumerate(mixed_stream(seed, length, UPSERT_KEY, pks=9)):
        if position % 40 == 0:
            lines.append(json.dumps({"time": position}) + "\n")
        if rnd.random() < 0.01:
            lines.append('{"op": "+X", "row": [1]}\n')
        lines.append(json.dumps({"op": change.kind.value, "row": list(change.row)}) + "\n")
    return lines


def command(config: str, root: Path, source: Path, name: str) -> list[str]:
    return [SCRIPT, "replay", "--pk", "0", "-q", *CONFIGS[config], "--on-error", "skip",
            "--dead-letter", str(root / f"{name}.dead.jsonl"), "--state-dir", str(root / f"{name}.state"),
            "--misses", str(root / f"{name}.misses.jsonl"), "-o", str(root / f"{name}.out.jsonl"),
            str(source)]  # fmt: skip


def files(root: Path, name: str) -> tuple[bytes, bytes, list[dict[str, object]]]:
    out, dead, misses = ((root / f"{name}.{kind}.jsonl").read_bytes() for kind in ("out", "dead", "misses"))
    return out, dead, [run_independent(json.loads(line)) for line in misses.splitlines()]


def run_independent(record: dict[str, object]) -> dict[str, object]:
    """A miss record without what depends on where the process started: the count of expiry
    removals it saw, and so whether a key holding no row is said to have expired."""
    record = {name: value for name, value in record.items() if name != "expired"}
    if record["cause"] in ("expired", "never_added"):
        record["cause"] = "no row"
    return record


@pytest.mark.slow
@pytest.mark.parametrize("config", list(CONFIGS))
def test_killed_at_any_instant_and_rerun_equals_one_uninterrupted_run(tmp_path: Path, config: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(source_lines(seed=len(config), length=1500)))
    started = time.monotonic()
    reference = subprocess.run(command(config, tmp_path, source, "ref"), capture_output=True, text=True)
    duration = time.monotonic() - started
    assert reference.returncode == 0, reference.stderr
    expected = files(tmp_path, "ref")
    assert expected[1], "the stream has bad lines, so dead letters are checked too"
    assert expected[2], "the stream has retractions that match nothing, so misses are checked too"

    rnd = random.Random(config)
    args = command(config, tmp_path, source, "run")
    kills = sequences = 0
    while kills < KILLS:
        # One sequence: from a fresh directory, run with random kills until a run exits 0.
        sequences += 1
        for name in ("run.state", "run.out.jsonl", "run.dead.jsonl", "run.misses.jsonl"):
            shutil.rmtree(tmp_path / name, ignore_errors=True)
            (tmp_path / name).unlink(missing_ok=True)
        while True:
            process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                process.wait(timeout=rnd.uniform(0, duration * 1.2))
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
                kills += 1
            assert process.stderr is not None
            stderr = process.stderr.read().decode()
            process.stderr.close()
            assert process.returncode in (0, -signal.SIGKILL), stderr
            if process.returncode == 0:
                break
        assert files(tmp_path, "run") == expected, f"sequence {sequences}, {kills} kills so far"
        again = subprocess.run(args, capture_output=True, text=True, timeout=300)
        assert again.returncode == 0, again.stderr
        assert "was already applied completely" in again.stderr
        assert files(tmp_path, "run") == expected
    print(f"{config}: {kills} kills in {sequences} sequences over a {duration:.2f} s run, all exact")
