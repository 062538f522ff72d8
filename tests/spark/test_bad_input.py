"""Rows that cannot be changes, in every source format: on-error fail stops before the batch
commits and names file, line (or Parquet row) and reason; a rerun after fixing the file continues
exactly once; on-error skip writes them to the dead-letter directory and goes on; `upsertmat run`
exits 1 with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]
import pytest
from pyspark.sql import SparkSession

from upsertmat.spark import PipelineConfig
from upsertmat.spark.parts import Column, SinkSpec, SourceSpec, SparkOptions
from upsertmat.spark.pipeline import read_table, run_pipeline
from upsertmat.spark.sources.badinput import BadInput
from upsertmat.spark.sources.formats import source_format

from .envelopes import debezium_lines

pytestmark = [pytest.mark.spark, pytest.mark.slow]

COLUMNS = (Column("id", "long"), Column("v", "string"))
"""The row's columns (the source's DDL: ``op``, ``seq``, then these; a CSV line in that order)."""
GOOD = [{"seq": 0, "op": "+I", "id": 1, "v": "a"}, {"seq": 1, "op": "+I", "id": 2, "v": "b"}]
AFTER = [{"seq": 10, "op": "+I", "id": 3, "v": "c"}, {"seq": 11, "op": "-D", "id": 1, "v": "a"}]


def place(directory: Path, name: str, content: bytes, number: int) -> Path:
    """Write a file atomically with modification time ``number`` seconds after a fixed past start."""
    directory.mkdir(parents=True, exist_ok=True)
    staged = directory.parent / f".{name}.tmp"
    staged.write_bytes(content)
    moment = time.time() - 100 + number
    os.utime(staged, (moment, moment))
    target = directory / name
    staged.rename(target)
    return target


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def config_of(tmp_path: Path, fmt: str, on_error: str = "fail") -> PipelineConfig:
    return PipelineConfig(
        source=SourceSpec(tmp_path / "in", source_format(fmt), COLUMNS, on_error=on_error),
        sink=SinkSpec(f"sqlite:///{tmp_path / 'sink.db'}", "t"),
        primary_key=("id",),
        checkpoint=tmp_path / "checkpoint",
        spark=SparkOptions(max_files_per_trigger=1),
    )


def dead_letters(config: PipelineConfig) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(config.dead_letters.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


def test_jsonl_fails_before_the_batch_commits_and_a_fixed_file_continues_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    place(tmp_path / "in", "a.json", jsonl(GOOD), 0)
    bad = jsonl(AFTER[:1]) + b'{"seq": 12, "op": "XX", "id": 4, "v": "d"}\nnot json\n' + jsonl(AFTER[1:])
    path = place(tmp_path / "in", "b.json", bad, 1)
    config = config_of(tmp_path, "json")
    with pytest.raises(BadInput) as failed:
        run_pipeline(config, spark)
    message = str(failed.value)
    assert "\n" not in message
    assert f"bad input in micro-batch 1: {path} line 2: unknown op 'XX' in column 'op'" in message
    assert "(and 1 more bad row(s) in this batch)" in message
    assert [(row.line, row.reason) for row in failed.value.rows] == [
        (2, "unknown op 'XX' in column 'op' (expected one of +I, -U, +U, -D)"),
        (3, "invalid JSON: Expecting value (column 1)"),
    ]
    assert read_table(config, spark) == [(1, "a"), (2, "b")]  # batch 0 only
    with pytest.raises(BadInput):  # the same input stops at the same place
        run_pipeline(config, spark)
    path.write_bytes(jsonl(AFTER))  # fixed in place
    result = run_pipeline(config, spark)
    assert [batch.batch_id for batch in result.batches] == [1] and not result.batches[0].skipped
    assert read_table(config, spark) == [(2, "b"), (3, "c")]


def test_csv_and_parquet_rows_are_skipped_into_dead_letters(spark: SparkSession, tmp_path: Path) -> None:
    csv_text = "op,seq,id,v\n+I,0,1,a\n+I,1,x,b\n+I,2,2,c,extra\n+U,3,,d\n+I,4,3,e\n"
    csv_path = place(tmp_path / "in", "a.csv", csv_text.encode(), 0)
    config = config_of(tmp_path, "csv", "skip")
    result = run_pipeline(config, spark)
    assert result.bad_rows == 3 and result.batches[0].bad_rows == 3
    assert read_table(config, spark) == [(1, "a"), (3, "e")]
    letters = dead_letters(config)
    assert [(item["file"], item["line"]) for item in letters] == [
        (str(csv_path), 3),
        (str(csv_path), 4),
        (str(csv_path), 5),
    ]
    assert letters[0]["error"] == "column 'id' must be a long, got 'x'"
    assert letters[1]["error"] == "5 field(s), expected 4 (op, seq, id, v)"
    assert letters[2]["error"] == "no key: the sink primary key column 'id' is missing or null"
    assert letters[0]["text"] == "+I,1,x,b" and letters[0]["batch"] == 0

    parquet = tmp_path / "p"
    rows = [
        {"seq": 0, "op": "+I", "id": 1, "v": "a"},
        {"seq": 1, "op": None, "id": 2, "v": "b"},
        {"seq": None, "op": "+I", "id": 3, "v": "c"},
        {"seq": 3, "op": "+I", "id": 4, "v": "d"},
    ]
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(rows), buffer)
    parquet_path = place(parquet / "in", "a.parquet", buffer.getvalue().to_pybytes(), 0)
    config = config_of(parquet, "parquet", "skip")
    result = run_pipeline(config, spark)
    assert read_table(config, spark) == [(1, "a"), (4, "d")]
    letters = dead_letters(config)
    assert [(item["file"], item["row"], item["error"]) for item in letters] == [
        (str(parquet_path), 1, "no op: the column 'op' is missing or null"),
        (str(parquet_path), 2, "no order: the column 'seq' is missing or null (an integer is needed)"),
    ]

    wrong = tmp_path / "w"
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist([{"seq": 0, "op": "+I", "id": "one", "v": "a"}]), buffer)
    wrong_path = place(wrong / "in", "a.parquet", buffer.getvalue().to_pybytes(), 0)
    with pytest.raises(BadInput, match=f"{wrong_path}: column '?id'? is .* the job declares bigint"):
        run_pipeline(config_of(wrong, "parquet", "skip"), spark)


def test_cdc_envelopes_fail_with_their_line(spark: SparkSession, tmp_path: Path) -> None:
    lines = debezium_lines([("+I", {"id": 1, "v": "a"}), ("+I", {"id": 2, "v": "b"})])
    lines.insert(1, json.dumps({"op": "x", "after": {"id": 9}}))
    path = place(tmp_path / "in", "a.json", "".join(line + "\n" for line in lines).encode(), 0)
    config = config_of(tmp_path, "debezium-json")
    with pytest.raises(BadInput, match=f"micro-batch 0: {path} line 2: unknown Debezium op 'x'"):
        run_pipeline(config, spark)
    skipping = config_of(tmp_path, "debezium-json", "skip")
    assert run_pipeline(skipping, spark).bad_rows == 1
    assert read_table(skipping, spark) == [(1, "a"), (2, "b")]


def test_run_exits_1_with_one_line(tmp_path: Path) -> None:
    place(tmp_path / "in", "a.jsonl", jsonl(GOOD) + b'{"seq": 5, "op": "+X", "id": 3, "v": "c"}\n', 0)
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: bad\nsource: {path: in, columns: [{id: long}, {v: string}]}\nkeys: {primary-key: [id]}\n"
    )
    done = subprocess.run(
        [str(Path(sys.executable).parent / "upsertmat"), "run", str(job)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if "bad input" in line]
    assert errors == [
        f"upsertmat run: bad input in micro-batch 0: {tmp_path / 'in' / 'a.jsonl'} line 3: unknown op '+X' "
        "in column 'op' (expected one of +I, -U, +U, -D); nothing of this batch is committed. Fix the file "
        "in place and run the job again (it continues at this batch, exactly once), or set on-error: skip "
        "to write bad rows to the dead-letter directory"
    ]
    assert "Traceback" not in done.stderr
