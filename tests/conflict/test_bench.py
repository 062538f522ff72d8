"""``python tools/bench_conflict.py``: runs, reports state sizes, checks boundedness (not timed)."""

from __future__ import annotations

import json
from pathlib import Path

from upsertmat.spec import Change

from ..toolscripts import load

bench = load("bench_conflict")
long_history, main, many_keys, with_watermarks = (
    bench.long_history,
    bench.main,
    bench.many_keys,
    bench.with_watermarks,
)


def test_workloads_are_deterministic_and_watermarked() -> None:
    assert many_keys(500, 10, 1).changes == many_keys(500, 10, 1).changes
    assert len(many_keys(500, 10, 1).changes) == 500
    lines = with_watermarks(long_history(100, 10, 0).changes, 25)
    assert [line for line in lines if not isinstance(line, Change)] == [1, 2, 3, 4]


def test_a_small_run_reports_bounded_state_for_the_compacting_behaviours(tmp_path: Path) -> None:
    out = tmp_path / "cells.json"
    argv = ["--records", "400", "--keys", "20", "--retract-delay", "30", "--interval", "10,100"]
    assert (
        main([*argv, "--backend", "heap,lmdb", "--repetitions", "1", "--check-bounded", "--json", str(out)])
        == 0
    )
    cells = json.loads(out.read_text())
    assert len(cells) == 2 * 2 * 2 * 3
    for cell in cells:
        if cell["behavior"] == "DEDUPLICATE":
            assert cell["bounded_checks"] == 0
            continue
        assert cell["bounded_checks"] > 0
        if cell["workload"] == "long-history":
            assert cell["rows_held"] <= 1  # one sink key
        else:
            assert cell["rows_held"] <= 20
    dedup = [
        cell for cell in cells if cell["behavior"] == "DEDUPLICATE" and cell["workload"] == "long-history"
    ]
    assert all(cell["rows_held"] == 30 for cell in dedup)  # the full history of live rows
