"""tools/state_copy_bench.py: the Spark state's local copy alone, at a (small) table size."""

from __future__ import annotations

import json

import pytest

from ..toolscripts import load


def test_every_batch_reads_and_writes_the_copy_and_the_map_grows(capsys: pytest.CaptureFixture[str]) -> None:
    load("state_copy_bench").main(
        ["--entries", "400000", "--groups", "16", "--changes", "5000", "--batches", "2"]
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["entries"] == 400_000
    assert [line["batch"] for line in lines[1:-1]] == [0, 1]
    assert all(line["read_seconds"] > 0 and line["write_seconds"] > 0 for line in lines[1:-1])
    summary = lines[-1]
    assert summary["enabled"] is True
    assert summary["map_resizes"] >= 1  # ~45 MB of entries in a map opened at 64 MiB
    assert summary["data_file_bytes"] <= 256 << 20  # grown with the copy, not to the largest map


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        load("state_copy_bench").main(["--changes", "0"])
    assert stopped.value.code == 2
    assert "--changes must be >= 1" in capsys.readouterr().err
