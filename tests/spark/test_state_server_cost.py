"""tools/state_server_cost.py: the cost of a state call and of a byte on Spark's state server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ..toolscripts import TOOLS, load


def test_the_line_through_exact_points_is_exact() -> None:
    line = load("state_server_cost").line
    assert line([(0.0, 100.0), (1.0, 111.5), (4.0, 146.0)]) == {"per_call_us": 100.0, "per_kib_us": 11.5}
    assert line([(2.0, 50.0)]) == {"per_call_us": 50.0, "per_kib_us": 0.0}  # one size: no slope


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        load("state_server_cost").main(["--batches", "1"])
    assert stopped.value.code == 2
    assert "--batches must be >= 2" in capsys.readouterr().err


@pytest.mark.spark
@pytest.mark.slow
def test_every_call_of_every_size_is_timed_on_real_spark() -> None:
    """In a process of its own (the tool starts and stops its Spark session)."""
    arguments = ["--sizes", "16,4096", "--batches", "3", "--groups", "8"]
    done = subprocess.run(
        [sys.executable, str(TOOLS / "state_server_cost.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout)
    assert report["groups"] == 8 and report["batches"] == 3
    assert set(report["sizes"]) == {"16", "4096"}
    for timings in report["sizes"].values():
        assert set(timings) == {"get_us", "update_us", "append_us"}
        assert all(value > 0 for value in timings.values())
    assert set(report["get_line"]) == {"per_call_us", "per_kib_us"}
