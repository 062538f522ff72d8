"""One PNG per backend: throughput vs history length, one line per strategy.

Panels: one row per upsert-key setting, one column per retract percentage. x = retract_delay
(the history length the timed part runs at; log scale), y = median ops/ms (log scale), bars
from min to max over the repetitions. A ``partial`` cell (budget ran out) is drawn as a
hollow marker at its partial rate; skipped and failed cells are absent. One legend below the
panels; axes labelled with plain numbers (:mod:`upsertmat.bench.figures`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..impls import Backend, Strategy
from .figures import legend_below, log_values, log_x_at, new_figure
from .runner import OK, PARTIAL, CellResult

PARTIAL_NOTE = "hollow: partial cell (budget ran out; rate over the records done, an upper bound)"

_MARKERS = {
    Strategy.LEGACY: "o",
    Strategy.VALUE: "s",
    Strategy.MAP: "^",
    Strategy.SORTED: "D",
    Strategy.ADAPTIVE: "v",
}
# One colour per strategy in every panel, so that the figure's one legend holds for all of them.
_COLORS = {strategy: f"C{index}" for index, strategy in enumerate(Strategy)}


def _panel(axes: Any, results: Sequence[CellResult]) -> bool:
    """Draw one panel; True if anything was drawn."""
    drawn = False
    for strategy in Strategy:
        mine = sorted(
            (r for r in results if r.cell.strategy is strategy and r.status in (OK, PARTIAL)),
            key=lambda r: r.cell.retract_delay,
        )
        full = [r for r in mine if r.summary is not None]
        partial = [r for r in mine if r.summary is None and r.partial_throughput]
        if not full and not partial:
            continue
        marker, color = _MARKERS[strategy], _COLORS[strategy]
        if full:
            xs = [r.cell.retract_delay for r in full]
            medians = [s.median for r in full if (s := r.summary) is not None]
            low = [s.median - s.minimum for r in full if (s := r.summary) is not None]
            high = [s.maximum - s.median for r in full if (s := r.summary) is not None]
            axes.errorbar(
                xs, medians, yerr=[low, high], marker=marker, color=color, capsize=3, label=strategy.value
            )
        if partial:
            axes.plot(
                [r.cell.retract_delay for r in partial],
                [r.partial_throughput for r in partial],
                linestyle="none",
                marker=marker,
                markerfacecolor="none",
                color=color,
                label=None if full else f"{strategy.value} (partial)",
            )
        drawn = True
    return drawn


def _log_axes(axes: Any, delays: Sequence[int]) -> None:
    """x: log, a labelled tick at each delay run; y: log, labelled 1-2-5 or finer
    (:func:`upsertmat.bench.figures.log_values`)."""
    log_x_at(axes, delays)
    log_values(axes)


def throughput_figure(
    backend: Backend,
    results: Sequence[CellResult],
    machine: Mapping[str, Any],
    records: int,
    payload: int,
) -> Figure | None:
    """The figure of ``backend``'s cells; None if none of them was measured."""
    mine = [r for r in results if r.cell.backend is backend]
    keys = sorted({r.cell.upsert_key for r in mine}, reverse=True)
    percentages = sorted({r.cell.retract_percentage for r in mine}, reverse=True)
    if not keys or not percentages:
        return None
    figure = new_figure(5.5 * len(percentages), 4.2 * len(keys) + 0.8)
    grid = figure.subplots(len(keys), len(percentages), squeeze=False)
    drawn = False
    for row, upsert_key in enumerate(keys):
        for column, percentage in enumerate(percentages):
            axes = grid[row][column]
            cells = [
                r for r in mine if r.cell.upsert_key == upsert_key and r.cell.retract_percentage == percentage
            ]
            if _panel(axes, cells):
                drawn = True
                _log_axes(axes, sorted({r.cell.retract_delay for r in cells}))
            axes.set_title(f"upsert key {'on' if upsert_key else 'off'}, retract {percentage}%")
            axes.set_xlabel("retract_delay (history length)")
            axes.set_ylabel(f"ops/ms, {mine[0].clock} clock (median, min-max)")
            axes.grid(True, which="both", alpha=0.3)
    if not drawn:
        return None
    figure.suptitle(
        f"upsertmat bench - backend {backend.value}\n"
        f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, {machine.get('date', '')}; "
        f"{records} timed records, payload {payload} B",
        fontsize="medium",
    )
    note = Line2D(
        [], [], linestyle="none", marker="o", markerfacecolor="none", color="gray", label=PARTIAL_NOTE
    )
    partial = any(r.status == PARTIAL for r in mine)
    legend_below(figure, [axes for line in grid for axes in line], extra=[note] if partial else ())
    return figure


def plot_backend(
    path: Path,
    backend: Backend,
    results: Sequence[CellResult],
    machine: Mapping[str, Any],
    records: int,
    payload: int,
) -> bool:
    """Write ``path`` (PNG) for ``backend``'s cells. False (nothing written) if none was measured."""
    figure = throughput_figure(backend, results, machine, records, payload)
    if figure is None:
        return False
    figure.savefig(path, dpi=100)
    return True
