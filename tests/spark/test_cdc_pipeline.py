"""The demo's changes as Debezium, Canal and Maxwell envelopes give the same table as the demo's
JSON Lines input (the issue's goal), into SQLite, Delta Lake and Iceberg sinks."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.demo.tables import expected_table
from upsertmat.demo.workload import DemoShape, generate
from upsertmat.spark import PipelineConfig
from upsertmat.spark.parts import Column, SinkSpec, SourceSpec, SparkOptions
from upsertmat.spark.pipeline import read_table, run_pipeline
from upsertmat.spark.sources.formats import source_format

from ..sinks.lakereaders import delta_rows, iceberg_rows
from .envelopes import WRITERS

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COLUMNS = (Column("id", "long"), Column("level", "long"), Column("badge", "string"))
FILES = 3


def write_parts(directory: Path, parts: list[list[str]], suffix: str) -> None:
    """One file per part, modification times 1 s apart (Spark takes files in that order)."""
    directory.mkdir(parents=True)
    start = time.time() - len(parts) - 10
    for number, lines in enumerate(parts):
        staged = directory.parent / f"{directory.name}-{number}.tmp"
        staged.write_text("".join(line + "\n" for line in lines))
        os.utime(staged, (start + number, start + number))
        staged.rename(directory / f"part-{number:02d}{suffix}")


def test_cdc_envelopes_give_the_jsonl_table(spark: SparkSession, tmp_path: Path) -> None:
    data = generate(DemoShape(users=25, events=220, seed=3))
    changes = [(c.op, {"id": c.id, "level": c.level, "badge": c.badge}) for c in data.arrival]
    size = -(-len(changes) // FILES)
    chunks = [changes[start : start + size] for start in range(0, len(changes), size)]
    jsonl = [
        [json.dumps({"seq": start + index, "op": op, **row}) for index, (op, row) in enumerate(chunk)]
        for start, chunk in zip(range(0, len(changes), size), chunks, strict=True)
    ]
    write_parts(tmp_path / "jsonl", jsonl, ".json")

    def config(name: str, fmt: str, url: str) -> PipelineConfig:
        return PipelineConfig(
            source=SourceSpec(tmp_path / name, source_format(fmt), COLUMNS),
            sink=SinkSpec(url, name.replace("-", "_")),
            primary_key=("id",),
            checkpoint=tmp_path / f"checkpoint-{name}",
            spark=SparkOptions(max_files_per_trigger=1),
        )

    reference = config("jsonl", "json", f"sqlite:///{tmp_path / 'ref.db'}")
    run_pipeline(reference, spark)
    expected = sorted(read_table(reference, spark))
    assert {row[0]: tuple(row) for row in expected} == expected_table(data.logical)

    sinks = {
        "debezium-json": f"delta:///{tmp_path / 'delta'}",
        "canal-json": f"iceberg:///{tmp_path / 'warehouse'}",
        "maxwell-json": f"sqlite:///{tmp_path / 'maxwell.db'}",
    }
    for fmt, url in sinks.items():
        write_parts(tmp_path / fmt, [WRITERS[fmt](chunk) for chunk in chunks], ".json")
        cdc = config(fmt, fmt, url)
        result = run_pipeline(cdc, spark)
        assert len(result.batches) == FILES and result.bad_rows == 0, fmt
        assert sorted(read_table(cdc, spark)) == expected, fmt
    assert sorted(delta_rows(tmp_path / "delta")) == expected
    assert sorted(iceberg_rows(tmp_path / "warehouse", "canal_json")) == expected
