"""What every benchmark plot does with its figure and axes, so that every value is readable.

- Log axes are labelled with plain numbers (``20``, ``0.5``, never ``2x10^1``): an axis of
  measured positions (delays, intervals) has a tick at each of them, and a value axis has a
  labelled tick at 1, 2 and 5 times each power of ten, or at every integer multiple when the
  data spans less than a factor of 20, with its range widened to at least a factor of 2.5 and,
  where its top or bottom part would carry no label, to the next labelled value, so every
  panel has labelled values near its top and bottom to read a point against.
- Legends sit outside the plotting area, below the panels (one legend for the whole figure,
  every label once), so no legend hides a data point. Figures use matplotlib's constrained
  layout, which makes room for the legend and the titles.

Needs matplotlib (the ``bench`` extra); import this module only when plotting.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

PLAIN = FuncFormatter(lambda value, _position: f"{value:g}")
"""Tick labels as plain numbers: ``0.5``, ``20``, ``5000`` (``g`` keeps them short)."""

ALL_SUBS = tuple(float(sub) for sub in range(1, 10))


def new_figure(width: float, height: float) -> Figure:
    """A figure of ``width`` x ``height`` inches with constrained layout (room for the legend
    below the panels and for the titles is made when it is drawn)."""
    return Figure(figsize=(width, height), layout="constrained")


def log_x_at(axes: Any, positions: Iterable[float]) -> None:
    """A log scale on ``axes``' x axis with a labelled tick at each of ``positions`` (the values
    the measurement was run at: delays, intervals) and no other tick."""
    axes.set_xscale("log")
    axes.set_xticks(sorted({float(position) for position in positions if position > 0}))
    axes.xaxis.set_major_formatter(PLAIN)
    axes.xaxis.set_minor_locator(NullLocator())


def log_values(axes: Any) -> None:
    """A log scale on ``axes``' y axis, labelled at 1-2-5 (or every integer multiple of a power
    of ten when the data spans less than a factor of 20); a range narrower than a factor of
    2.5 is widened around its geometric centre. Call after the data is drawn."""
    axes.set_yscale("log")
    low, high = axes.get_ylim()
    if high < 2.5 * low:
        center = (low * high) ** 0.5
        low, high = center / 1.6, center * 1.6
        axes.set_ylim(low, high)
    subs = (1.0, 2.0, 5.0) if high >= 20 * low else ALL_SUBS
    if subs != ALL_SUBS:  # (a narrower range is labelled densely by matplotlib already)
        low, high = _labelled_ends(low, high, subs)
        axes.set_ylim(low, high)
    axes.yaxis.set_major_locator(LogLocator(base=10, subs=subs))
    axes.yaxis.set_major_formatter(PLAIN)
    axes.yaxis.set_minor_locator(LogLocator(base=10, subs=ALL_SUBS))
    axes.yaxis.set_minor_formatter(NullFormatter())


def _labelled_ends(low: float, high: float, subs: Sequence[float]) -> tuple[float, float]:
    """``(low, high)`` widened, where needed, to the next labelled tick (``subs`` times a power
    of ten), so that the top and the bottom part of the axis (a factor of 1.6 from each end)
    each carry a label: a panel reaching 4,100 with labels at 2,000 and 5,000 shows up to 5,000
    instead of leaving its top part unlabelled."""

    def ticks_between(lower: float, upper: float) -> list[float]:
        found = []
        for exponent in range(math.floor(math.log10(lower)) - 1, math.ceil(math.log10(upper)) + 2):
            found += [sub * 10.0**exponent for sub in subs if lower <= sub * 10.0**exponent <= upper]
        return found

    if low <= 0 or high <= low:
        return low, high
    if not ticks_between(high / 1.6, high):
        high = min(ticks_between(high, high * 10.0))
    if not ticks_between(low, low * 1.6):
        low = max(ticks_between(low / 10.0, low))
    return low, high


def legend_below(figure: Figure, panels: Sequence[Any], extra: Sequence[Any] = (), columns: int = 4) -> None:
    """One legend for ``figure``, below its panels: every labelled line or bar of ``panels``
    once (the first handle of each label), then the ``extra`` handles (explanations such as
    "hollow marker: partial"). Nothing is drawn when there is no label."""
    handles, labels = [], []
    for axes in panels:
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    for handle in extra:
        handles.append(handle)
        labels.append(handle.get_label())
    if handles:
        figure.legend(
            handles, labels, loc="outside lower center", ncols=min(columns, len(handles)), fontsize="small"
        )
