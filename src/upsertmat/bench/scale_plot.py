"""The scale sweep's figure: time per micro-batch against table size, one line per sink and
matching mode, and beside it the state bytes a batch moves (read + written). Log-log axes
labelled with plain numbers (:mod:`upsertmat.bench.figures`)."""

from __future__ import annotations

from pathlib import Path

from .figures import legend_below, log_values, log_x_at, new_figure
from .scale import ScaleFigures


def plot_scale(figures: ScaleFigures, path: Path) -> Path:
    """Write the figure as PNG to ``path``; bars span min to max over the measured batches."""
    figure = new_figure(11, 4.4)
    time_axes, bytes_axes = figure.subplots(1, 2)
    series: dict[tuple[str, bool], list[tuple[int, list[float], list[float]]]] = {}
    for run in figures.runs:
        seconds = [batch.batch_seconds for batch in run.batches]
        moved = [(batch.state_bytes_read + batch.state_bytes_written) / 2**20 for batch in run.batches]
        series.setdefault((run.sink, run.upsert_key), []).append((run.size, seconds, moved))
    sizes = sorted({run.size for run in figures.runs})
    for (sink, keyed), points in sorted(series.items()):
        points.sort()
        label = f"{sink}, {'upsert key' if keyed else 'whole rows'}"
        style = "--" if keyed else "-"
        xs = [point[0] for point in points]
        for axes, values in ((time_axes, [p[1] for p in points]), (bytes_axes, [p[2] for p in points])):
            medians = [sorted(v)[len(v) // 2] for v in values]
            low = [m - min(v) for m, v in zip(medians, values, strict=True)]
            high = [max(v) - m for m, v in zip(medians, values, strict=True)]
            axes.errorbar(xs, medians, yerr=[low, high], marker="o", linestyle=style, capsize=3, label=label)
    for axes, title in (
        (time_axes, f"seconds per micro-batch of {figures.bench.batch_changes:,} changes"),
        (bytes_axes, "state MiB moved per micro-batch (read + written)"),
    ):
        if sizes:
            log_x_at(axes, sizes)
        log_values(axes)
        axes.set_xlabel("live sink keys (table size)")
        axes.set_title(title, fontsize=10)
        axes.grid(True, which="major", alpha=0.3)
    legend_below(figure, [time_axes], columns=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    return path
