"""``bench --quick`` calls its goal checks indicative; every plot panel has readable y ticks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from upsertmat.bench.plot import _log_axes
from upsertmat.cli import main


def labelled_y_ticks(lows_highs: list[float]) -> list[str]:
    figure = Figure()
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    axes.plot([2, 10, 100], lows_highs, marker="o")
    _log_axes(axes, [2, 10, 100])
    figure.canvas.draw()
    low, high = axes.get_ylim()
    return [
        label.get_text()
        for tick, label in zip(axes.get_yticks(), axes.get_yticklabels(), strict=True)
        if low <= tick <= high and label.get_text()
    ]


@pytest.mark.parametrize(
    "values",
    [[45.0, 50.0, 55.0], [31.0, 41.0, 52.0], [8.0, 40.0, 90.0], [0.5, 40.0, 900.0], [100.0, 100.0, 100.0]],
    ids=["within 25%", "under a factor 2", "across 10", "three decades", "flat"],
)
def test_every_panel_has_several_labelled_y_ticks(values: list[float]) -> None:
    labels = labelled_y_ticks(values)
    assert len(labels) >= 3, labels


def test_quick_goals_are_called_indicative(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--quick", "--strategy", "VALUE", "--backend", "heap", "--retract-delay", "2"]
    argv += ["--retract-percentage", "100", "--upsert-key", "on", "--output-dir", str(tmp_path), "--quiet"]
    assert main(["bench", *argv]) == 0
    out = capsys.readouterr().out
    assert "goals: indicative only" in out
    document = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert document["goals_note"].startswith("indicative only")
    assert main(["bench", *argv, "--format", "markdown"]) == 0
    assert "indicative only" in capsys.readouterr().out


def test_a_full_preset_run_has_no_quick_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--strategy", "VALUE", "--backend", "heap", "--retract-delay", "2", "--workload", "flip544"]
    argv += ["--retract-percentage", "100", "--upsert-key", "on", "--records", "200", "--repetitions", "1"]
    assert main(["bench", *argv, "--output-dir", str(tmp_path), "--quiet"]) == 0
    assert "indicative" not in capsys.readouterr().out
    assert "goals_note" not in json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
