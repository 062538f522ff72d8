"""tools/processor_cost.py: the pipeline's processor under pyspark's in-memory harness."""

from __future__ import annotations

import json

import pytest

from ..toolscripts import load


@pytest.mark.parametrize("matching", [[], ["--upsert-key"]])
def test_the_processor_runs_every_bucket_of_every_batch_and_keeps_state(
    matching: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    tool = load("processor_cost")
    assert tool.main(["--changes", "3000", "--keys", "300", "--files", "3", *matching]) == 0
    report = json.loads(capsys.readouterr().out)
    expected_rows = sum(len(batch) for batch in tool.batches(3000, 300, 3))
    assert report["batches"] == 3 and report["keys"] == 300
    # One output row per bucket and batch (every bucket that got changes emits its last ones).
    assert report["output_rows"] == expected_rows
    assert report["state_bytes"] > 0


def test_no_run_builds_the_input_only(capsys: pytest.CaptureFixture[str]) -> None:
    assert load("processor_cost").main(["--changes", "100", "--files", "1", "--no-run"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["output_rows"] == 0 and report["state_bytes"] == 0


def test_bad_sizes_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        load("processor_cost").main(["--changes", "0"])
    assert stopped.value.code == 2
    assert "must be positive" in capsys.readouterr().err
