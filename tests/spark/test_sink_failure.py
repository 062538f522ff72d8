"""A sink that becomes unavailable or full mid-stream stops the query with a clear error naming
the sink and the micro-batch; after the fix, a restart on the checkpoint continues exactly once.

Real failures: the PostgreSQL server is stopped after some batches (and started again), and a
SQLite sink lives on a small tmpfs that fills up (and is remounted larger).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from pyspark.sql import SparkSession

from upsertmat.sinks import SinkFailure
from upsertmat.spark import PipelineConfig
from upsertmat.spark.config import BatchProgress
from upsertmat.spark.pipeline import read_table, run_pipeline
from upsertmat.spec import Change

from ..prerequisites import require
from .postgres import PostgresServer, server_binaries
from .test_recovery import count_batches
from .workload import changelog, model_table, normalized, records, workload_config, write_files

if TYPE_CHECKING:
    from ..conftest import Tmpfs  # the fixture's type (tests/conftest.py)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

FILES = 6
FAIL_AFTER = 2


def config_for(tmp_path: Path, sink_url: str, table: str) -> PipelineConfig:
    return workload_config(tmp_path / "in", tmp_path / f"checkpoint-{table}", sink_url, table)


def check_restart(
    spark: SparkSession, config: PipelineConfig, changes: list[Change], reference: Path
) -> None:
    restarted = run_pipeline(config, spark)
    assert restarted.batches, "the restart applied the failed batch and the rest"
    assert count_batches(config, spark) == FILES  # each batch recorded once
    whole = replace(
        config,
        checkpoint=reference / "checkpoint",
        sink=replace(config.sink, url=f"sqlite:///{reference / 'ref.db'}"),
    )
    run_pipeline(whole, spark)
    table = normalized(read_table(config, spark))
    assert table == normalized(read_table(whole, spark))
    assert table == normalized(model_table(changes))


def test_a_postgres_sink_that_goes_away_stops_the_query_and_a_restart_continues_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    binaries = server_binaries()
    require(binaries is not None, "PostgreSQL server binaries (the Debian package postgresql)")
    assert binaries is not None
    changes = changelog(seed=5, keys=20, updates=240)
    write_files(tmp_path / "in", records(changes), files=FILES)
    server = PostgresServer(binaries)
    server.start()
    try:

        def stop_after(progress: BatchProgress) -> None:
            if progress.batch_id == FAIL_AFTER - 1:
                server.stop()

        config = replace(config_for(tmp_path, server.url, "pg"), progress=stop_after)
        with pytest.raises(SinkFailure) as failure:
            run_pipeline(config, spark)
        message = str(failure.value)
        assert f"the PostgreSQL sink {server.url} failed on micro-batch {FAIL_AFTER}" in message
        assert "run the job again" in message and "Traceback" not in message
        server.start()
        check_restart(spark, replace(config, progress=None), changes, tmp_path / "reference")
    finally:
        server.stop()
        server.remove()


@pytest.mark.parametrize("small_tmpfs", ["64k"], indirect=True)
def test_a_full_sqlite_sink_stops_the_query_and_a_restart_after_freeing_space_continues_once(
    spark: SparkSession, tmp_path: Path, small_tmpfs: Tmpfs
) -> None:
    changes = changelog(seed=6, keys=400, updates=800)
    write_files(tmp_path / "in", records(changes), files=FILES)
    sink = small_tmpfs.path / "sink.db"
    config = config_for(tmp_path, f"sqlite:///{sink}", "full")
    with pytest.raises(SinkFailure) as failure:
        run_pipeline(config, spark)
    message = str(failure.value)
    assert f"the SQLite sink {sink} failed on micro-batch" in message
    assert "full" in message and "run the job again" in message
    small_tmpfs.resize("64m")
    check_restart(spark, config, changes, tmp_path / "reference")
