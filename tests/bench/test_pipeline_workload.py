"""The pipeline benchmark's workload and figures (no Spark)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest

from upsertmat.bench.footprint import RssSampler
from upsertmat.bench.pipeline import (
    LIBRARIES,
    PipelineBench,
    PipelineFigures,
    library_versions,
    report,
    write_workload,
)
from upsertmat.jobs.model import SourceFormat


def test_workload_is_a_valid_upsert_changelog(tmp_path: Path) -> None:
    assert write_workload(PipelineBench(changes=1001, keys=100, files=3), tmp_path) == 1000
    files = sorted(tmp_path.iterdir())
    assert [f.name for f in files] == ["changes-0000.jsonl", "changes-0001.jsonl", "changes-0002.jsonl"]
    records = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    assert [r["seq"] for r in records] == list(range(1000))
    assert Counter(r["op"] for r in records) == {"+I": 100, "-U": 450, "+U": 450}
    live: dict[int, tuple[int, str]] = {}
    for r in records:
        row = (r["version"], r["payload"])
        if r["op"] == "+I":
            assert r["id"] not in live
            live[r["id"]] = row
        elif r["op"] == "-U":
            assert live.pop(r["id"]) == row  # retracts exactly the live row
        else:
            assert r["id"] not in live and r["version"] > 0
            live[r["id"]] = row
    assert len(live) == 100
    assert len(records[0]["payload"]) == 20


def test_parquet_workload_has_the_same_records(tmp_path: Path) -> None:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    bench = PipelineBench(changes=500, keys=50, files=2)
    write_workload(bench, tmp_path / "j")
    write_workload(replace(bench, source_format=SourceFormat.PARQUET), tmp_path / "p")
    jsonl = [
        json.loads(line) for f in sorted((tmp_path / "j").iterdir()) for line in f.read_text().splitlines()
    ]
    parquet = [row for f in sorted((tmp_path / "p").iterdir()) for row in pq.read_table(f).to_pylist()]
    assert parquet == jsonl


def test_stages_and_report() -> None:
    figures = PipelineFigures(
        changes=1000, keys=10, files=1, strategy="VALUE", source_format="jsonl", session_seconds=4.0,
        write_seconds=0.1,
        source_seconds=1.0, materializer_run_seconds=3.0, end_to_end_seconds=4.0, sink_timer_seconds=2.5,
        batches=1, keyed_end_to_end_seconds=2.0, peak_rss_mb={"driver": 80.0, "jvm": 900.0, "workers": 210.0},
    )  # fmt: skip
    assert figures.stages() == {"source read": 1.0, "shuffle + materializer": 2.0, "sink write": 1.0}
    assert figures.end_to_end_rate == 250.0
    assert figures.keyed_rate == 500.0
    assert figures.as_dict()["ratio_to_goal"] == pytest.approx(250 / 50_000)
    assert figures.as_dict()["keyed_end_to_end_changes_per_second"] == 500.0
    text = report(figures)
    assert "end to end, whole rows (upsert-key: [], as the example job): 4.0 s = 250 changes/s" in text
    assert "(goal 50,000: ratio 0.01)" in text
    assert "end to end, upsert key id: 2.0 s = 500 changes/s" in text
    assert "peak RSS: driver (Python) 80 MiB, Spark JVM 900 MiB, Python workers 210 MiB (summed)" in text
    assert "shuffle + materializer       2.0 s" in text


def test_the_library_versions_are_recorded_and_reported() -> None:
    """Two builds compared side by side must name pyarrow and pyspark: an extra's pins can move
    them (pypaimon pins pyarrow < 20)."""
    import pyarrow as pa

    found = library_versions()
    assert set(found) == set(LIBRARIES)
    assert found["pyarrow"] == pa.__version__ and found["msgpack"] != "absent"
    figures = PipelineFigures(
        changes=10, keys=1, files=1, strategy="VALUE", source_format="jsonl", session_seconds=1.0,
        write_seconds=0.1, source_seconds=1.0, materializer_run_seconds=1.0, end_to_end_seconds=1.0,
        sink_timer_seconds=1.0, batches=1, libraries={"pyspark": "4.3.0", "pyarrow": "19.0.1"},
    )  # fmt: skip
    assert "libraries: pyspark 4.3.0, pyarrow 19.0.1" in report(figures)
    assert figures.as_dict()["libraries"] == {"pyspark": "4.3.0", "pyarrow": "19.0.1"}


def test_the_rss_sampler_sees_this_process_and_its_children() -> None:
    """The pipeline's peak RSS per role (driver, JVM, Python workers) comes from /proc. Sampled in a
    fresh process: this one may have a Spark JVM of an earlier test among its children."""
    import subprocess
    import sys

    script = """
import json, subprocess, sys
from upsertmat.bench.footprint import RssSampler
with RssSampler(interval=0.05, rescan=0.05) as sampler:
    child = "import time; block = bytearray(64 * 2**20); time.sleep(0.5)"
    subprocess.run([sys.executable, "-c", child], check=True)
print(json.dumps(sampler.peaks))
"""
    done = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True)
    peaks = json.loads(done.stdout)
    assert peaks["driver"] > 10 * 2**20
    assert peaks["workers"] > 64 * 2**20  # a Python child: counted as a worker
    assert peaks["jvm"] == 0


def test_the_rss_sampler_walks_proc_only_once_per_rescan_interval() -> None:
    """Finding the descendants reads every process's /proc entry: between rescans a sample reads
    only the known descendants. A public sample() always looks afresh."""
    sampler = RssSampler(rescan=3600.0)
    sampler.sample()
    for _ in range(5):
        sampler._sample(rescan=False)
    assert sampler.scans == 1
    sampler.sample()
    assert sampler.scans == 2
    assert sampler.peaks["driver"] > 0


def test_per_batch_timings_and_fixed_cost_in_the_report() -> None:
    figures = PipelineFigures(
        changes=300_000, keys=10, files=3, strategy="VALUE", source_format="jsonl", session_seconds=4.0,
        write_seconds=0.1, source_seconds=1.0, materializer_run_seconds=3.0, end_to_end_seconds=4.0,
        sink_timer_seconds=2.5, batches=3,
        batch_ms=(4000, 2000, 3000), outside_batch_ms=(900, 100, 120), state_commit_ms=(150, 90, 110),
        sink_write_ms=(300, 200, 250), fixed_batch_ms=(600, 800, 700),
    )  # fmt: skip
    summary = figures.batch_summary()
    assert summary["batch"] == {"min": 2000, "median": 3000, "max": 4000}
    assert figures.stages()["sink write"] == 0.75  # the sink's own transaction times, summed
    assert summary["fixed (one-change batch)"]["median"] == 700
    assert figures.fixed_cost_ms == 700
    data = figures.as_dict()
    assert data["per_batch_ms"]["sink transaction"] == {"min": 200, "median": 250, "max": 300}
    text = report(figures)
    assert "  batch                         2,000    3,000    4,000" in text
    fixed = "fixed cost per micro-batch: 700 ms = 23% of the median batch (3,000 ms for 100,000 changes)"
    assert fixed in text


def test_no_per_batch_lines_without_timings() -> None:
    figures = PipelineFigures(
        changes=10, keys=1, files=1, strategy="VALUE", source_format="jsonl", session_seconds=1.0,
        write_seconds=0.1, source_seconds=1.0, materializer_run_seconds=1.0, end_to_end_seconds=1.0,
        sink_timer_seconds=1.0, batches=1,
    )  # fmt: skip
    assert figures.fixed_cost_ms is None
    assert "per micro-batch" not in report(figures) and "fixed cost" not in report(figures)
