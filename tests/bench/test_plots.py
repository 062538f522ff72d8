"""Every benchmark plot can be read: the legend covers no data point (it sits outside every
panel), and log axes are labelled with plain numbers, several per axis, a tick at each
measured position."""

from __future__ import annotations

from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from upsertmat.bench.plot import PARTIAL_NOTE, throughput_figure
from upsertmat.bench.runner import OK, PARTIAL, Cell, CellResult
from upsertmat.bench.workload import HistoryShape
from upsertmat.impls import Backend, Strategy

from ..toolscripts import load

ConflictCell, conflict_figure = load("bench_conflict").Cell, load("bench_conflict").conflict_figure
ratio_figure = load("sidebyside").ratio_figure

DELAYS = (2, 10, 100, 1000, 5000)


def result(strategy: Strategy, upsert_key: bool, percentage: int, delay: int, rate: float) -> CellResult:
    """A measured cell (three repetitions around ``rate``), or a partial one below 1 ops/ms."""
    cell = Cell(strategy, Backend.HEAP, upsert_key, delay, percentage)
    history = HistoryShape(delay, delay, delay, delay)
    if rate < 1:
        return CellResult(cell, 10_000, history, 3, status=PARTIAL, partial_wall=rate, partial_records=500)
    return CellResult(cell, 10_000, history, 3, status=OK, wall_throughputs=[rate * 0.9, rate, rate * 1.1])


def grid() -> list[CellResult]:
    """A full grid shaped like a real run: flat strategies near the top of each panel (where a
    legend inside would sit), LEGACY collapsing into partial cells."""
    rates = {
        Strategy.LEGACY: (380, 150, 20, 0.6, 0.4),
        Strategy.VALUE: (714, 700, 690, 632, 300),
        Strategy.MAP: (553, 550, 549, 546, 540),
        Strategy.SORTED: (559, 555, 550, 534, 520),
        Strategy.ADAPTIVE: (675, 650, 600, 486, 480),
    }
    return [
        result(strategy, upsert_key, percentage, delay, rate)
        for strategy, row in rates.items()
        for upsert_key in (True, False)
        for percentage in (100, 75)
        for delay, rate in zip(DELAYS, row, strict=True)
    ]


def drawn(figure: Figure) -> Figure:
    FigureCanvasAgg(figure)
    figure.canvas.draw()
    return figure


def panels(figure: Figure) -> list[Any]:
    return [axes for axes in figure.axes if axes.has_data()]


def assert_legend_outside_every_panel(figure: Figure) -> None:
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    assert figure.legends, "the figure has a legend"
    assert not any(axes.get_legend() for axes in figure.axes), "no legend inside a panel"
    for legend in figure.legends:
        box = legend.get_window_extent(renderer)
        assert figure.bbox.contains(box.x0, box.y0) and figure.bbox.contains(box.x1, box.y1)
        for axes in panels(figure):
            assert not box.overlaps(axes.get_window_extent(renderer)), axes.get_title()


def labels_in_view(axes: Any, which: str) -> list[str]:
    axis = axes.xaxis if which == "x" else axes.yaxis
    low, high = axes.get_xlim() if which == "x" else axes.get_ylim()
    ticks = axis.get_majorticklocs()
    texts = [label.get_text() for label in axis.get_majorticklabels()]
    return [text for tick, text in zip(ticks, texts, strict=True) if low <= tick <= high and text]


def assert_plain_labels(labels: list[str], at_least: int) -> None:
    assert len(labels) >= at_least, labels
    assert all("$" not in text and "^" not in text for text in labels), labels  # no 2x10^1


def test_throughput_plots_keep_the_legend_off_the_data() -> None:
    figure = throughput_figure(Backend.HEAP, grid(), {"cpu": "test", "cores": 2}, 10_000, 250)
    assert figure is not None
    assert_legend_outside_every_panel(drawn(figure))
    texts = [text.get_text() for legend in figure.legends for text in legend.get_texts()]
    assert texts[:5] == ["LEGACY", "VALUE", "MAP", "SORTED", "ADAPTIVE"]  # each once, for every panel
    assert texts[-1] == PARTIAL_NOTE
    for axes in panels(figure):
        assert labels_in_view(axes, "x") == [str(delay) for delay in DELAYS]
        assert_plain_labels(labels_in_view(axes, "y"), at_least=3)


def test_a_strategy_keeps_its_colour_in_every_panel() -> None:
    # VALUE is missing from one panel: the colours of the others must not shift there.
    results = [r for r in grid() if not (r.cell.strategy is Strategy.VALUE and not r.cell.upsert_key)]
    figure = throughput_figure(Backend.HEAP, results, {}, 10_000, 250)
    assert figure is not None
    colours: dict[str, set[str]] = {}
    for axes in panels(figure):
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            line = handle.lines[0] if hasattr(handle, "lines") else handle  # an errorbar's data line
            colours.setdefault(label.removesuffix(" (partial)"), set()).add(str(line.get_color()))
    assert colours and all(len(seen) == 1 for seen in colours.values()), colours


def test_conflict_plots_keep_the_legend_off_the_data() -> None:
    cells = [
        ConflictCell(workload, backend, behavior, interval, 50_000, [rate * scale], rows, pending)
        for workload, rows in (("long-history", 1), ("many-keys", 1000))
        for backend, scale in (("heap", 1.0), ("rocksdb", 0.3), ("lmdb", 0.5))
        for behavior, rate in (("DEDUPLICATE", 90.0), ("NOTHING", 55.0), ("ERROR", 45.0))
        for interval, pending in ((10, 0), (100, 0), (1000, 0), (10_000, 1000))
    ]
    figure = drawn(conflict_figure(cells))
    assert_legend_outside_every_panel(figure)
    for axes in panels(figure):
        assert labels_in_view(axes, "x") == ["10", "100", "1000", "10000"]
        assert_plain_labels(labels_in_view(axes, "y"), at_least=3)


@pytest.mark.parametrize("ratios", [(1.2, 1.5, 2.1), (3.4, 3.9, 4.6), (0.8, 1.0, 8.0)])
def test_side_by_side_plots_keep_the_legend_off_the_bars(ratios: tuple[float, ...]) -> None:
    rows = [
        {"cell": f"MAP/heap d={index}", "ratio_wall": ratio, "ratio_cpu": ratio * 1.05}
        for index, ratio in enumerate(ratios)
    ]
    figure = drawn(ratio_figure(rows, "new vs old"))
    assert_legend_outside_every_panel(figure)
    labels = labels_in_view(figure.axes[0], "x")
    assert len(labels) >= 2 and all(text.endswith("x") and "^" not in text for text in labels), labels


@pytest.mark.parametrize(("low", "high"), [(200.0, 3700.0), (180.0, 4100.0), (3.0, 7000.0), (40.0, 900.0)])
def test_a_value_axis_has_a_label_near_its_top_and_its_bottom(low: float, high: float) -> None:
    """Issue #33: a panel reaching ~4,000 ops/ms had its last label at 2,000 (labels at 1-2-5):
    the axis now reaches the next labelled value, so a point near the top can be read."""
    from upsertmat.bench.figures import log_values, new_figure

    figure = new_figure(4, 3)
    axes = figure.add_subplot()
    axes.plot([1, 2], [low, high])
    log_values(axes)
    drawn(figure)
    bottom, top = axes.get_ylim()
    values = [float(text) for text in labels_in_view(axes, "y")]
    assert bottom <= low and top >= high
    assert max(values) >= top / 1.6 and min(values) <= bottom * 1.6, (values, bottom, top)
