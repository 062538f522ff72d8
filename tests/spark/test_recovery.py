"""A pipeline SIGKILLed mid-stream and restarted on its checkpoint leaves the same sink table as
an uninterrupted run: no batch lost, none applied twice (SQLite and PostgreSQL)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.jobs.runner import committed_batches
from upsertmat.sinks.sql import BATCHES_TABLE
from upsertmat.spark import PipelineConfig
from upsertmat.spark.parts import SinkSpec
from upsertmat.spark.pipeline import read_table, run_pipeline

from .harness import kill_after_batches
from .workload import changelog, model_table, normalized, records, workload_config, write_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FILES = 8
KILL_AFTER = 3


def kill_mid_stream(config: PipelineConfig, workdir: Path) -> int:
    """Run ``config`` in a subprocess; SIGKILL it after KILL_AFTER batches (the reports seen)."""
    return kill_after_batches(config, workdir, KILL_AFTER)


def count_batches(config: PipelineConfig, spark: SparkSession) -> int:
    if config.sink.url.startswith("postgresql"):
        import psycopg

        with psycopg.connect(config.sink.url) as db:
            row = db.execute(
                f"SELECT count(*) FROM {BATCHES_TABLE} WHERE sink_table = %s", (config.sink.table,)
            ).fetchone()
            return 0 if row is None else int(row[0])
    import sqlite3

    with sqlite3.connect(config.sink.url.removeprefix("sqlite:///")) as db:
        return int(
            db.execute(
                f"SELECT count(*) FROM {BATCHES_TABLE} WHERE sink_table = ?", (config.sink.table,)
            ).fetchone()[0]
        )


def check_kill_and_restart(spark: SparkSession, tmp_path: Path, sink_url: str, reference_url: str) -> None:
    changes = changelog(seed=11, keys=25, updates=400)
    write_files(tmp_path / "in", records(changes), files=FILES)
    config = workload_config(tmp_path / "in", tmp_path / "checkpoint", sink_url, "killed")
    reports = kill_mid_stream(config, tmp_path)
    assert reports == KILL_AFTER
    committed = count_batches(config, spark)
    assert KILL_AFTER <= committed < FILES
    restarted = run_pipeline(config, spark)
    # Spark's batches, which are not always the files: a kill between the file source's log and
    # the offsets log leaves two files that the next batch takes together.
    batches = committed_batches(tmp_path / "checkpoint")
    assert KILL_AFTER < batches <= FILES
    assert count_batches(config, spark) == batches  # each of them applied once
    assert restarted.batches[-1].batch_id == batches - 1
    uninterrupted = replace(
        config, checkpoint=tmp_path / "checkpoint2", sink=SinkSpec(reference_url, "whole")
    )
    run_pipeline(uninterrupted, spark)
    table = normalized(read_table(config, spark))
    assert table == normalized(read_table(uninterrupted, spark))
    assert table == normalized(model_table(changes))


def test_sqlite_sink_survives_sigkill(spark: SparkSession, tmp_path: Path) -> None:
    check_kill_and_restart(
        spark, tmp_path, f"sqlite:///{tmp_path / 'sink.db'}", f"sqlite:///{tmp_path / 'ref.db'}"
    )


def test_postgres_sink_survives_sigkill(spark: SparkSession, tmp_path: Path, postgres_url: str) -> None:
    check_kill_and_restart(spark, tmp_path, postgres_url, postgres_url)
