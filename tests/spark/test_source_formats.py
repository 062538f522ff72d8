"""The table of source formats (upsertmat.spark.sources.formats): each format named once, every
reader there, old spellings read, and the names usable without pyspark (no Spark started)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from upsertmat.impls.settings import ConflictBehavior, Strategy, TtlSettings
from upsertmat.jobs.model import SinkSpec as JobSink
from upsertmat.jobs.model import SourceFormat as JobFormat
from upsertmat.jobs.model import SourceSpec as JobSource
from upsertmat.jobs.model import SparkOptions as JobSpark
from upsertmat.spark.config import PIPELINE_SETTINGS, PipelineConfig, PipelineConfigError
from upsertmat.spark.parts import Column, SinkSpec, SourceSpec, SparkOptions
from upsertmat.spark.sources.formats import NAMES, PIPELINE_NAMES, Reader, SourceFormat, source_format


def test_each_format_is_named_once_with_the_job_file_spelling() -> None:
    assert NAMES == ("jsonl", "parquet", "csv", "debezium-json", "canal-json", "maxwell-json")
    assert JobFormat is SourceFormat  # jobs/ names the table's formats, not a copy
    assert (JobSource, JobSink, JobSpark) == (SourceSpec, SinkSpec, SparkOptions)  # and the pipeline's parts
    assert [member.value for member in SourceFormat if member.is_cdc] == list(NAMES[3:])
    assert [member for member in SourceFormat if not member.is_text] == [SourceFormat.PARQUET]
    assert {member.title for member in SourceFormat} >= {"JSON Lines", "CSV", "Debezium JSON"}


def test_every_reader_of_the_table_has_its_spark_function() -> None:
    from upsertmat.spark.sources.cdc import MAPPINGS
    from upsertmat.spark.sources.files import READERS

    assert set(READERS) == set(Reader)
    assert set(MAPPINGS) == {member for member in SourceFormat if member.is_cdc}


def test_the_pipeline_spelling_is_read_as_its_format_and_others_refused() -> None:
    assert PIPELINE_NAMES == {SourceFormat.JSONL: "json"}  # the one other spelling, in the table
    assert source_format("json") is SourceFormat.JSONL
    assert source_format(SourceFormat.CSV) is SourceFormat.CSV
    with pytest.raises(ValueError, match="unknown source format 'xml'; one of jsonl, parquet, csv"):
        source_format("xml")


def test_a_config_spells_each_format_one_way_and_round_trips(tmp_path: Path) -> None:
    # the flat layout of configs written before they were made of a job's parts
    sink_url = f"sqlite:///{tmp_path / 's.db'}"
    fields = {
        "source_path": str(tmp_path / "in"),
        "schema": "seq LONG, op STRING, id LONG, `v` DECIMAL(10,2), ts LONG",
        "pk": ["id"],
        "checkpoint_dir": str(tmp_path / "cp"),
        "sink_url": sink_url,
    }
    old = PipelineConfig.from_json(json.dumps({**fields, "source_format": "json"}))
    assert old.source == SourceSpec(
        tmp_path / "in",
        SourceFormat.JSONL,
        (Column("id", "long"), Column("v", "decimal(10,2)"), Column("ts", "long")),
    )
    assert old.source.ddl() == "`op` STRING, `seq` BIGINT, `id` BIGINT, `v` DECIMAL(10,2), `ts` BIGINT"
    assert (old.sink, old.primary_key, old.checkpoint) == (
        SinkSpec(sink_url, "sink"),  # the flat layout's default table
        ("id",),
        tmp_path / "cp",
    )
    assert old.settings == PIPELINE_SETTINGS and old.spark == SparkOptions()
    assert PipelineConfig.from_json(old.to_json()) == old
    as_job = PipelineConfig.from_json(json.dumps({**fields, "source_format": "jsonl"}))
    assert as_job == old and json.loads(as_job.to_json())["source"]["format"] == "jsonl"
    csv = PipelineConfig.from_json(json.dumps({**fields, "source_format": "csv"}))
    assert csv.source.format is SourceFormat.CSV and PipelineConfig.from_json(csv.to_json()) == csv
    with pytest.raises(PipelineConfigError, match="unknown source format 'xml'"):
        PipelineConfig.from_json(json.dumps({**fields, "source_format": "xml"}))
    every = {
        **fields,
        "columns": ["v", "id"],
        "ts_column": "ts",
        "arrival_column": "seq",
        "table": "t",
        "strategy": "MAP",
        "ttl": {"ttl_ms": 5},
        "miss_rows": 0,
        "key_buckets": 4,
        "state_layout": "blob",
        "spark_conf": {"spark.executor.memory": "1g"},
        "conflict": "NOTHING",
        "watermark_delay": "5 seconds",
        "on_error": "skip",
        "dead_letter_dir": str(tmp_path / "dead"),
        "changelog": True,
    }
    read = PipelineConfig.from_json(json.dumps(every))
    assert read.source == SourceSpec(
        tmp_path / "in",
        SourceFormat.JSONL,
        (Column("v", "decimal(10,2)"), Column("id", "long")),
        on_error="skip",
        dead_letter=tmp_path / "dead",
        ts_column="ts",
    )
    assert read.settings == replace(
        PIPELINE_SETTINGS, strategy=Strategy.MAP, ttl=TtlSettings(ttl_ms=5), miss_rows=0
    )
    assert read.spark == SparkOptions(
        key_buckets=4, state_layout="blob", conf={"spark.executor.memory": "1g"}
    )
    assert (read.sink.table, read.conflict, read.watermark_delay, read.changelog) == (
        "t",
        ConflictBehavior.NOTHING,
        "5 seconds",
        True,
    )


def test_jobs_name_the_formats_without_pyspark(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(
        "source: {path: in, format: canal-json, columns: [{id: long}]}\nkeys: {primary-key: [id]}\n"
    )
    script = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pyspark' or name.startswith('pyspark.'):\n"
        "            raise ImportError('no pyspark here')\n"
        "sys.meta_path.insert(0, Block())\n"
        "from pathlib import Path\n"
        "from upsertmat.jobs.loader import load_job\n"
        f"job = load_job(Path({str(job)!r}))\n"
        "print(job.source.format.value, job.source.format.is_cdc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["canal-json", "True"]
