"""The exactly-once campaign of the bucket state (key buckets, the ``log`` layout): SIGKILL the
driver's whole process tree at random moments, restart on the same checkpoint, and at the end
compare the table with the model and with an uninterrupted run. Run twice: with the default
inline bound (the workload's buckets are small, so every state stays inline in its head) and
with ``state_inline_bytes=0`` (every state a log read through the machine-local copy, which a
kill can leave ahead of what Spark committed).

CI runs ``UPSERTMAT_KILLS`` (default 2) kills per form; the full campaign is
``UPSERTMAT_KILLS=20 pytest -m slow tests/spark/test_state_kills.py`` (docs/spark.md).
"""

from __future__ import annotations

import os
import random
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.impls.state.spark import INLINE_MAX
from upsertmat.jobs.runner import committed_batches
from upsertmat.sinks.sql import BATCHES_TABLE
from upsertmat.spark.parts import SinkSpec, SparkOptions
from upsertmat.spark.pipeline import STATE_COPY, read_table, run_pipeline

from .random_kills import KILLS, run_until_killed
from .workload import changelog, model_table, normalized, records, workload_config, write_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("inline_bytes", [INLINE_MAX, 0], ids=["inline", "log"])
def test_bucket_state_survives_random_kills(spark: SparkSession, tmp_path: Path, inline_bytes: int) -> None:
    files = 4 * KILLS + 2
    changes = changelog(seed=29, keys=40, updates=60 * files)
    write_files(tmp_path / "in", records(changes), files=files)
    options = SparkOptions(max_files_per_trigger=1, key_buckets=4, state_inline_bytes=inline_bytes)
    sink = tmp_path / "sink.db"
    url = f"sqlite:///{sink}"
    config = workload_config(tmp_path / "in", tmp_path / "checkpoint", url, "killed", spark=options)
    rng = random.Random(int(os.environ.get("UPSERTMAT_KILL_SEED", "41")))
    kills = 0
    while kills < KILLS and run_until_killed(config, tmp_path, rng):
        kills += 1
    assert kills == KILLS, f"the run finished after {kills} kills; give it more files"
    run_pipeline(config, spark)
    reference_sink = SinkSpec(f"sqlite:///{tmp_path / 'ref.db'}", "whole")
    reference = replace(config, checkpoint=tmp_path / "checkpoint2", sink=reference_sink)
    run_pipeline(reference, spark)
    expected = normalized(model_table(changes))
    assert normalized(read_table(reference, spark)) == expected
    assert normalized(read_table(config, spark)) == expected
    batches = committed_batches(tmp_path / "checkpoint")
    with sqlite3.connect(sink) as db:
        applied = [row[0] for row in db.execute(f"SELECT batch_id FROM {BATCHES_TABLE} ORDER BY batch_id")]
    assert applied == list(range(batches))  # each batch applied once, none lost
    # The log form used the machine-local copy (in the checkpoint); the inline form never opens it.
    copy = tmp_path / "checkpoint" / STATE_COPY
    assert copy.exists() == (inline_bytes == 0)
