"""``upsertmat demo`` end to end: the blind sink loses rows, the materialized one matches exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.cli import main
from upsertmat.demo.tables import disagreements, expected_table, read_sqlite_table
from upsertmat.demo.workload import DemoShape, generate

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_demo_shows_the_blind_sink_wrong_and_the_materialized_one_right(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--dir", str(tmp_path), "--seed", "11", "--quiet"]) == 0
    expected = expected_table(generate(DemoShape(seed=11)).logical)
    raw = read_sqlite_table(tmp_path / "demo.db", "raw")
    materialized = read_sqlite_table(tmp_path / "demo.db", "materialized")
    assert disagreements(materialized, expected) == []
    wrong = disagreements(raw, expected)
    assert wrong
    out = capsys.readouterr().out
    assert f"without materializer: {len(wrong)} (" in out
    assert "with materializer:    0" in out
    assert "expected (logical order)" in out
