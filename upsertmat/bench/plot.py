"""One PNG per backend: throughput vs history length, one line per strategy.

Panels: one row per upsert-key setting, one column per retract percentage. x = retract_delay
(the history length the timed part runs at; log scale), y = median ops/ms (log scale), bars
from min to max over the repetitions. A ``partial`` cell (budget ran out) is drawn as a
hollow marker at its partial rate; skipped and failed cells are absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

from ..impls import Backend, Strategy
from .runner import OK, PARTIAL, CellResult

_MARKERS = {
    Strategy.LEGACY: "o",
    Strategy.VALUE: "s",
    Strategy.MAP: "^",
    Strategy.SORTED: "D",
    Strategy.ADAPTIVE: "v",
}


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
        marker = _MARKERS[strategy]
        color = None
        if full:
            xs = [r.cell.retract_delay for r in full]
            medians = [s.median for r in full if (s := r.summary) is not None]
            low = [s.median - s.minimum for r in full if (s := r.summary) is not None]
            high = [s.maximum - s.median for r in full if (s := r.summary) is not None]
            container = axes.errorbar(
                xs, medians, yerr=[low, high], marker=marker, capsize=3, label=strategy.value
            )
            color = container.lines[0].get_color()
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


def _plain(value: float, _position: float) -> str:
    return f"{value:g}"


def _log_axes(axes: Any, delays: Sequence[int]) -> None:
    """Log scales with plain numbers: x ticks at the delays run; y ticks labelled at 1, 2 and
    5 times each power of ten, or at every integer multiple when the data spans less than a
    factor of 20, and the y range widened to at least a factor of 2.5 around the data, so
    every panel has several labelled values to read against."""
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xticks([delay for delay in delays if delay > 0])
    axes.xaxis.set_major_formatter(FuncFormatter(_plain))
    axes.xaxis.set_minor_locator(NullLocator())
    low, high = axes.get_ylim()
    if high < 2.5 * low:
        center = (low * high) ** 0.5
        low, high = center / 1.6, center * 1.6
        axes.set_ylim(low, high)
    subs = (1.0, 2.0, 5.0) if high >= 20 * low else tuple(float(sub) for sub in range(1, 10))
    axes.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    axes.yaxis.set_major_formatter(FuncFormatter(_plain))
    axes.yaxis.set_minor_locator(LogLocator(base=10, subs=tuple(float(sub) for sub in range(1, 10))))
    axes.yaxis.set_minor_formatter(NullFormatter())


def plot_backend(
    path: Path,
    backend: Backend,
    results: Sequence[CellResult],
    machine: Mapping[str, Any],
    records: int,
    payload: int,
) -> bool:
    """Write ``path`` (PNG) for ``backend``'s cells. False (nothing written) if none was measured."""
    mine = [r for r in results if r.cell.backend is backend]
    keys = sorted({r.cell.upsert_key for r in mine}, reverse=True)
    percentages = sorted({r.cell.retract_percentage for r in mine}, reverse=True)
    if not keys or not percentages:
        return False
    figure = Figure(figsize=(5.5 * len(percentages), 4.2 * len(keys)))
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
                axes.legend(fontsize="small")
            axes.set_title(f"upsert key {'on' if upsert_key else 'off'}, retract {percentage}%")
            axes.set_xlabel("retract_delay (history length)")
            axes.set_ylabel(f"ops/ms, {mine[0].clock} clock (median, min-max)")
            axes.grid(True, which="both", alpha=0.3)
    figure.suptitle(
        f"upsertmat bench - backend {backend.value}\n"
        f"{machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, {machine.get('date', '')}; "
        f"{records} timed records, payload {payload} B",
        fontsize="medium",
    )
    if any(r.status == PARTIAL for r in mine):
        figure.text(
            0.01,
            0.005,
            "hollow markers: partial cells (budget ran out; rate over the records done, an upper bound)",
            fontsize="small",
        )
    figure.tight_layout(rect=(0, 0.02, 1, 1))
    if drawn:
        figure.savefig(path, dpi=100)
    return drawn
