"""The side-by-side comparison of two builds (``python tools/sidebyside.py``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ..prerequisites import require
from ..toolscripts import load

sidebyside = load("sidebyside")
CellSpec, Samples, markdown, report_rows = (
    sidebyside.CellSpec,
    sidebyside.Samples,
    sidebyside.markdown,
    sidebyside.report_rows,
)


def test_cell_parsing_and_labels() -> None:
    assert CellSpec.parse("MAP/rocksdb:flip544:1000") == CellSpec("MAP/rocksdb", "flip544", 1000)
    assert CellSpec.parse("MAP/rocksdb:many-keys:async") == CellSpec("MAP/rocksdb", "many-keys", 0, True)
    assert CellSpec.parse("VALUE/heap:many-keys").label == "VALUE/heap many-keys"
    assert CellSpec.parse("VALUE/heap:many-keys:async").label == "VALUE/heap many-keys async on/off"
    assert CellSpec.parse("MAP/lmdb:flip544:5000").label == "MAP/lmdb d=5000"
    for bad in ("MAP:flip544:2", "MAP/heap:other", "MAP/heap:flip544", "MAP/heap:flip544:x"):
        with pytest.raises(ValueError):
            CellSpec.parse(bad)
    for text in sidebyside.DEFAULT_CELLS:
        CellSpec.parse(text)
    nokey = CellSpec.parse("SORTED/lmdb:flip544:10:nokey")
    assert nokey == CellSpec("SORTED/lmdb", "flip544", 10, upsert_key=False)
    assert nokey.label == "SORTED/lmdb d=10 nokey"
    argv = sidebyside.bench_argv(nokey, 100, 0, 0, False, Path("out"), 1000, old_takes_interval=True)
    assert argv[argv.index("--upsert-key") + 1] == "off"
    assert argv[argv.index("--checkpoint-interval") + 1] == "1000"
    assert "--checkpoint-interval" not in sidebyside.bench_argv(nokey, 100, 0, 0, False, Path("out"), 1000)
    grid = {CellSpec.parse(text) for text in sidebyside.FULL_GRID}
    assert len(grid) == 5 * 3 * 4 * 2


def test_medians_and_ratios() -> None:
    cell = CellSpec("MAP/heap", "flip544", 2)
    samples = {
        (cell.label, "old"): Samples([10, 30, 20], [40, 40, 40]),
        (cell.label, "new"): Samples([60], []),
    }
    (row,) = report_rows([cell], samples)
    assert row["old_wall"] == 20 and row["new_wall"] == 60 and row["ratio_wall"] == 3.0
    assert row["ratio_cpu"] is None
    assert "| MAP/heap d=2 | 20 | 60 | 3x | 40 | - | - | 1 |" in markdown([row])


@pytest.mark.slow
def test_end_to_end_with_one_build_on_both_sides(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    executable = shutil.which("upsertmat")
    require(executable is not None, "the upsertmat executable on PATH (upsertmat installed)")
    assert executable is not None
    argv = ["--old", executable, "--new", executable, "--rounds", "1", "--records", "300"]
    argv += ["--cell", "VALUE/heap:flip544:2", "--cell", "VALUE/heap:many-keys:async"]
    argv += ["--changes", "1000", "--keys", "100", "--output-dir", str(tmp_path)]
    assert sidebyside.main(argv) == 0
    out = capsys.readouterr().out
    assert "| VALUE/heap d=2 |" in out and "| VALUE/heap many-keys async on/off |" in out
    document = json.loads((tmp_path / "sidebyside.json").read_text(encoding="utf-8"))
    assert [row["rounds"] for row in document["rows"]] == [1, 1]
    assert (tmp_path / "sidebyside.png").stat().st_size > 1000
