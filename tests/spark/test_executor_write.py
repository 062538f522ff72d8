"""The Paimon sink written from the executors (upsertmat.spark.executorwrite): the tasks write
the data files, the driver commits their messages once per batch. The table equals the one the
driver path writes and the model, for materialized and raw changelogs with updates and deletes;
a task whose first attempt fails after staging its files leaves no duplicate; on a standalone
two-worker cluster the table equals the local run, and the driver's CPU per batch does not grow
with the batch's rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from upsertmat.sinks import NetBatch
from upsertmat.sinks import paimon as paimon_sink
from upsertmat.sinks.base import TASK_FAILURE_VARIABLE, TaskOutput, TaskWriter
from upsertmat.spark import PipelineConfig
from upsertmat.spark.executorwrite import write_part
from upsertmat.spark.misses import MISS_OP
from upsertmat.spark.parts import SparkOptions
from upsertmat.spark.pipeline import SINK_WRITE_VARIABLE, read_table, run_pipeline
from upsertmat.spark.session import LOG_ENV
from upsertmat.spark.sources.badinput import BAD_OP

from ..prerequisites import require_module
from ..sinks.paimon_reader import paimon_batches, paimon_rows, state
from .cluster import standalone_cluster
from .run_config import SCRIPT as RUN_CONFIG
from .workload import changelog, model_table, normalized, records, workload_config, write_files

require_module("pypaimon", "pypaimon (the 'lakehouse' extra)")
pytestmark = [pytest.mark.spark]

FILES = 4


def config_for(
    tmp_path: Path,
    name: str,
    source: Path,
    key_buckets: int | None = None,
    master: str = "local[2]",
    conf: dict[str, str] | None = None,
    on_error: str = "fail",
    **changes: Any,
) -> PipelineConfig:
    spark = SparkOptions(max_files_per_trigger=1, key_buckets=key_buckets, master=master, conf=conf or {})
    url = f"paimon:///{tmp_path / f'warehouse-{name}'}"
    config = workload_config(source, tmp_path / f"checkpoint-{name}", url, "orders", spark=spark)
    return replace(config, source=replace(config.source, on_error=on_error), **changes)


def data_files_on_disk(warehouse: Path, table: str) -> set[str]:
    return {path.name for path in (warehouse / "upsertmat.db" / table).glob("bucket-*/data-*")}


def referenced_files(warehouse: Path, table: str) -> set[str]:
    found = state(warehouse, table)
    assert found is not None
    return {name for _, name, _ in found.files}


@pytest.mark.parametrize(
    "shape",
    [{"key_buckets": 4}, {"key_buckets": None}, {"materialize": False}],
    ids=["key-buckets", "per-key", "raw"],
)
def test_the_executors_write_the_table_the_driver_path_writes(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shape: dict[str, Any]
) -> None:
    changes = changelog(seed=21, keys=40, updates=500)
    write_files(tmp_path / "in", records(changes), files=FILES)
    executors = config_for(tmp_path, "executors", tmp_path / "in", **shape)
    driver = config_for(tmp_path, "driver", tmp_path / "in", **shape)

    def no_rows_on_the_driver(*args: object, **kwargs: object) -> object:
        raise AssertionError("the driver applied rows: the batch was not written by the executors")

    with monkeypatch.context() as patch:  # the driver process's sink only: workers are other processes
        patch.setattr(paimon_sink.PaimonSink, "apply_batch", no_rows_on_the_driver)
        result = run_pipeline(executors, spark)
    assert [batch.batch_id for batch in result.batches] == list(range(FILES))
    assert sum(batch.upserts + batch.deletes for batch in result.batches) > 0
    monkeypatch.setenv(SINK_WRITE_VARIABLE, "driver")
    by_driver = run_pipeline(driver, spark)
    monkeypatch.delenv(SINK_WRITE_VARIABLE)
    table = normalized(read_table(executors, spark))
    assert table == normalized(read_table(driver, spark))
    if shape.get("materialize", True):
        assert table == normalized(model_table(changes))
    warehouse = tmp_path / "warehouse-executors"
    assert normalized(paimon_rows(warehouse, "orders")) == table  # the independent reader
    assert paimon_batches(warehouse, "orders") == list(range(FILES))  # one snapshot per batch
    assert [(b.upserts, b.deletes, b.changes) for b in result.batches] == [
        (b.upserts, b.deletes, b.changes) for b in by_driver.batches
    ]


def run_in_subprocess(config: PipelineConfig, workdir: Path, name: str, **env: str) -> dict[str, Any]:
    """Run ``config`` to the end in a driver subprocess; its summary line (with ``driver_cpu``)."""
    path = workdir / f"config-{name}.json"
    path.write_text(config.to_json())
    done = subprocess.run(
        [sys.executable, str(RUN_CONFIG), str(path)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, LOG_ENV: str(workdir / f"driver-{name}.log"), **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


@pytest.mark.slow
def test_a_task_that_fails_after_staging_its_files_is_retried_without_a_duplicate(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The first attempt of task 0 of batch 1 writes its files and fails; Spark retries it
    (``local[2,4]``: up to 4 attempts); the table equals the model, and the failed attempt's files
    are on disk but in no snapshot."""
    changes = changelog(seed=8, keys=30, updates=400)
    write_files(tmp_path / "in", records(changes), files=FILES)
    config = config_for(tmp_path, "retried", tmp_path / "in", key_buckets=4, master="local[2,4]")
    summary = run_in_subprocess(config, tmp_path, "retried", **{TASK_FAILURE_VARIABLE: "1:0"})
    assert summary["done"] is True and summary["batches"] == FILES
    warehouse = tmp_path / "warehouse-retried"
    assert normalized(paimon_rows(warehouse, "orders")) == normalized(model_table(changes))
    assert normalized(read_table(config, spark)) == normalized(model_table(changes))
    assert paimon_batches(warehouse, "orders") == list(range(FILES))
    orphans = data_files_on_disk(warehouse, "orders") - referenced_files(warehouse, "orders")
    assert orphans  # the failed attempt did write, and no commit references its files
    log = (tmp_path / "driver-retried.log").read_text(errors="replace")
    assert "TaskFailureInjected" in log


@pytest.mark.slow
def test_on_a_two_worker_cluster_the_table_equals_the_local_run_and_driver_cpu_is_flat(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Two workers of one core: the executors write, the driver commits. The table equals a local
    run's and the model's; the driver process's CPU per batch for batches of ~50,000 changes is
    not far above that for ~2,000 (25 times the rows; the driver path's grows with them)."""
    batches = 3
    small = changelog(seed=31, keys=500, updates=batches * 1_000)  # ~2,000 changes a batch
    large = changelog(seed=32, keys=20_000, updates=batches * 25_000)  # ~50,000 a batch
    write_files(tmp_path / "small", records(small), files=batches)
    write_files(tmp_path / "large", records(large), files=batches)
    conf = {"spark.executor.memory": "512m", "spark.cores.max": "2"}
    cpu: dict[str, list[float]] = {}
    with standalone_cluster(tmp_path / "cluster", workers=2, cores=1) as (master, _):
        for name, source in (("small", tmp_path / "small"), ("large", tmp_path / "large")):
            config = config_for(tmp_path, name, source, key_buckets=8, master=master, conf=conf)
            summary = run_in_subprocess(config, tmp_path, name)
            assert summary["batches"] == batches
            cpu[name] = summary["driver_cpu"]
    large_config = config_for(tmp_path, "large", tmp_path / "large", key_buckets=8)
    local = config_for(tmp_path, "local", tmp_path / "large", key_buckets=8)
    run_pipeline(local, spark)
    table = normalized(read_table(large_config, spark))
    assert table == normalized(read_table(local, spark))
    assert table == normalized(model_table(large))
    assert normalized(paimon_rows(tmp_path / "warehouse-large", "orders")) == table
    # the first batch pays the sink's and Spark's warm-up: compare the later ones
    small_cpu, large_cpu = max(cpu["small"][1:]), max(cpu["large"][1:])
    print(f"driver CPU per batch: small {cpu['small']}, large {cpu['large']}")
    assert large_cpu <= 3 * small_cpu + 0.2, cpu


def test_bad_rows_reach_the_driver_from_the_executors(spark: SparkSession, tmp_path: Path) -> None:
    """The tasks pass bad source rows back to the driver with their file and line: on-error fail
    commits nothing of the batch (its staged files stay orphans), skip writes them to the dead
    letters and commits the rest."""
    from upsertmat.spark.sources.badinput import BadInput

    lines = [
        {"seq": 0, "op": "+I", "id": 1, "version": 0, "amount": 1.0, "flag": True, "payload": "a"},
        {"seq": 1, "op": "XX", "id": 2, "version": 0, "amount": 1.0, "flag": True, "payload": "b"},
        {"seq": 2, "op": "+I", "id": 3, "version": 0, "amount": 2.0, "flag": False, "payload": "c"},
    ]
    source = tmp_path / "in"
    source.mkdir()
    (source / "a.json").write_text("".join(json.dumps(line) + "\n" for line in lines) + "not json\n")
    failing = config_for(tmp_path, "fail", source, key_buckets=4)
    with pytest.raises(BadInput) as failed:
        run_pipeline(failing, spark)
    assert [row.line for row in failed.value.rows] == [2, 4]
    assert paimon_batches(tmp_path / "warehouse-fail", "orders") == []
    skipping = config_for(tmp_path, "skip", source, key_buckets=4, on_error="skip")
    result = run_pipeline(skipping, spark)
    assert result.batches[0].bad_rows == 2 and result.batches[0].upserts == 2
    assert [row[0] for row in read_table(skipping, spark)] == [1, 3]
    assert len(list(skipping.dead_letters.glob("*.jsonl"))) == 1


class Recording(TaskWriter):
    """A task writer that keeps what it is given."""

    def __init__(self) -> None:
        self.batches: list[NetBatch] = []

    def write(self, batch: NetBatch) -> TaskOutput:
        self.batches.append(batch)
        return TaskOutput((b"m",), len(batch.upserts), len(batch.deletes))


def test_a_part_is_ordered_by_arrival_and_reduced_to_its_last_change_per_key() -> None:
    """Without Spark: a task's part, out of order, reaches its writer as the last change of each
    key by arrival; bad rows and misses are kept apart for the driver, untouched."""
    writer = Recording()
    changes = [
        (5, "-D", (1, "x")),
        (1, "+I", (1, "a")),
        (2, MISS_OP, ('{"miss": 1}',)),
        (3, "+U", (2, "b")),
        (None, BAD_OP + '{"line": 4}', (None, None)),
        (4, "+U", (1, "c")),
        (0, "+I", (2, "z")),
    ]
    output, count, special = write_part(changes, (0,), writer, "q", 7)
    [batch] = writer.batches
    assert (batch.query_id, batch.batch_id, batch.upserts, batch.deletes) == ("q", 7, [(2, "b")], [(1,)])
    assert count == 5 and (output.upserts, output.deletes) == (1, 1)
    assert [change[1] for change in special] == [MISS_OP, BAD_OP + '{"line": 4}']
