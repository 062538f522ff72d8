"""``upsertmat bench``'s report reads as numbers with units, and every cell reports its memory
(issues #30 and #33): no ``3.07e+03``, no ``min-max`` of one repetition, an IQR that is one
number, state bytes per live row and the peak RSS per cell, the exit codes in ``--help``."""

from __future__ import annotations

from upsertmat.bench.report import _number, markdown_report, result_row, results_table
from upsertmat.bench.runner import Cell, CellResult, Plan, run_cell
from upsertmat.bench.workload import HistoryShape, generate
from upsertmat.commands.bench import EPILOG
from upsertmat.impls import Backend, Strategy


def test_numbers_read_as_people_write_them() -> None:
    assert [_number(value) for value in (3070.4, 12345.0, 999.4, 127.0, 12.66, 0.5123, None)] == [
        "3,070",
        "12,345",
        "999",
        "127",
        "12.7",
        "0.512",
        "-",
    ]


def result(throughputs: list[float]) -> CellResult:
    cell = Cell(Strategy.VALUE, Backend.HEAP, True, 2, 100)
    done = CellResult(cell, 100, HistoryShape(2, 2, 2.0, 2), len(throughputs), wall_throughputs=throughputs)
    done.state_bytes_per_row, done.state_bytes_method, done.live_rows = 123.4, "traced", 2
    done.peak_rss_bytes = 50 * 2**20
    return done


def test_the_table_has_units_one_number_per_statistic_and_memory() -> None:
    one = results_table([result([3070.0])]).splitlines()
    assert "ops/ms" in one[0] and "bytes per live row" in one[0]
    assert "e+0" not in "\n".join(one)
    line = one[-1].split()
    assert line[5:8] == ["3,070", "-", "-"]  # median, min..max and IQR of a single repetition
    assert line[-3:] == ["123", "50", "ok"]  # bytes per live row, peak RSS (MiB), status
    five = results_table([result([3000.0, 3100.0, 3200.0, 3300.0, 3400.0])]).splitlines()[-1].split()
    assert five[5:8] == ["3,200", "3,000..3,400", "200"]  # IQR = q3 - q1


def test_markdown_and_json_carry_the_memory() -> None:
    text = markdown_report([result([3070.0])], [])
    assert "| VALUE | on | 100 | 3,070 |" in text
    assert "| VALUE/heap ukey=on pct=100 delay=2 | 2 | 123 | traced | 50 |" in text
    row = result_row(result([3070.0]))
    assert (row["state_bytes_per_row"], row["state_bytes_method"], row["peak_rss_mb"]) == (
        123.4,
        "traced",
        50.0,
    )


def test_every_cell_measures_its_state() -> None:
    """Heap: traced bytes of the layout (the rows not counted); byte backends: bytes on disk
    above an empty state; and the peak RSS."""
    plan = Plan(
        pairs=[(Strategy.VALUE, Backend.HEAP), (Strategy.VALUE, Backend.LMDB)],
        upsert_keys=[False],
        retract_delays=[50],
        retract_percentages=[100],
        records=200,
        payload_size=100,
        repetitions=1,
    )
    for cell in plan.cells():
        done = run_cell(plan, cell, generate(plan.workload_spec(cell)))
        assert done.status == "ok", done.note
        assert done.live_rows == 50
        assert done.state_bytes_per_row is not None and 0 < done.state_bytes_per_row < 2000
        assert done.state_bytes_method == ("traced" if cell.backend is Backend.HEAP else "disk")
        assert (done.lmdb_pages is not None) == (cell.backend is Backend.LMDB)
        assert done.peak_rss_bytes > 10 * 2**20


def test_help_states_the_exit_codes() -> None:
    assert "exit codes: 0 ok" in EPILOG and "130/143" in EPILOG and "141" in EPILOG
