"""The exactly-once campaign of the lakehouse sinks (Delta Lake, Iceberg, Paimon): SIGKILL the
driver's whole process tree at random moments (between batches, inside a batch, inside the sink's
commit), restart on the same checkpoint, and at the end compare the table with an uninterrupted
run into SQLite and with the model, read by the independent reader; every batch id is committed
exactly once.

CI runs ``UPSERTMAT_KILLS`` (default 2) kills per sink; the full campaign of the issue is
``UPSERTMAT_KILLS=20 pytest -m slow tests/spark/test_lakehouse_kills.py`` (docs/spark.md).
"""

from __future__ import annotations

import os
import random
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.jobs.runner import committed_batches
from upsertmat.spark.parts import SinkSpec
from upsertmat.spark.pipeline import read_table, run_pipeline

from ..sinks.lakereaders import delta_rows, iceberg_commits, iceberg_rows, replay_delta
from ..sinks.paimon_reader import paimon_batches, paimon_rows
from .random_kills import KILLS, run_until_killed
from .workload import changelog, model_table, normalized, records, workload_config, write_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("kind", ["delta", "iceberg", "paimon"])
def test_lakehouse_sink_survives_random_kills(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    files = 4 * KILLS + 2
    changes = changelog(seed=17, keys=40, updates=60 * files)
    write_files(tmp_path / "in", records(changes), files=files)
    url = f"delta:///{tmp_path / 'table'}" if kind == "delta" else f"{kind}:///{tmp_path / 'warehouse'}"
    config = workload_config(tmp_path / "in", tmp_path / "checkpoint", url, "killed")
    rng = random.Random(int(os.environ.get("UPSERTMAT_KILL_SEED", "32")))
    kills = 0
    while kills < KILLS and run_until_killed(config, tmp_path, rng):
        kills += 1
    assert kills == KILLS, f"the run finished after {kills} kills; give it more files"
    run_pipeline(config, spark)
    reference = replace(
        config,
        checkpoint=tmp_path / "checkpoint2",
        sink=SinkSpec(f"sqlite:///{tmp_path / 'ref.db'}", "whole"),
    )
    run_pipeline(reference, spark)
    expected = normalized(read_table(reference, spark))
    assert expected == normalized(model_table(changes))
    # Spark's batches, which are not always the files: a kill between the file source's log and
    # the offsets log leaves files the next batch takes together.
    batches = committed_batches(tmp_path / "checkpoint")
    assert 2 <= batches <= files
    if kind == "delta":
        assert normalized(delta_rows(tmp_path / "table")) == expected
        assert replay_delta(tmp_path / "table").batches == list(range(batches))  # each batch once, in order
    elif kind == "paimon":
        assert normalized(paimon_rows(tmp_path / "warehouse", "killed")) == expected
        assert paimon_batches(tmp_path / "warehouse", "killed") == list(range(batches))  # one snapshot each
    else:
        assert normalized(iceberg_rows(tmp_path / "warehouse", "killed")) == expected
        assert iceberg_commits(tmp_path / "warehouse", "killed") == [[batch] for batch in range(batches)]
    assert normalized(read_table(config, spark)) == expected
