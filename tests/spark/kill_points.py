"""Exactly once where it matters most: a SIGKILL of the pipeline's driver at each kill point of a
sink's commit, made deterministic, for every sink kind
(test_sink_kill_points.py: the SQL sinks; test_sink_kill_points_lakehouse.py: the others; two
files, so that pytest-xdist runs them on both workers).

``UPSERTMAT_SINK_KILL_POINT=POINT:BATCH`` makes the driver SIGKILL itself inside batch
``BATCH``'s commit (:data:`upsertmat.sinks.base.KILL_POINTS`): ``before-commit`` — the batch
written, not committed (an open SQL transaction, a staged Delta MERGE, an Iceberg transaction
with its data files, Paimon data files without their snapshot) — and ``after-commit`` —
committed in the sink, not yet in Spark's commit log, so the restarted query runs the batch
again and the sink must skip it. After the kill the same config runs to the end on its
checkpoint: the table equals the model, every batch id is committed once (the sink's own
record), and the kill did land in the batch it named (the killed run reported every batch
before it and not that one). Random kills (tests/spark/test_lakehouse_kills.py,
test_recovery.py) cover the moments in between.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pyspark.sql import SparkSession

from upsertmat.sinks import kind_named, last_batch
from upsertmat.sinks.base import KILL_POINT_VARIABLE
from upsertmat.spark.parts import SparkOptions
from upsertmat.spark.pipeline import read_table, run_pipeline

from .run_config import SCRIPT as RUN_CONFIG
from .workload import changelog, model_table, normalized, records, workload_config, write_files

FILES = 4
KILLED = 2  # the batch whose commit is cut


def sink_url(kind: str, tmp_path: Path, postgres: str | None) -> str:
    if kind == "postgresql":
        assert postgres is not None
        return postgres
    return kind_named(kind).url_in(tmp_path, "sink")


def kill_inside_the_commit(
    spark: SparkSession, tmp_path: Path, kind: str, point: str, postgres: str | None = None
) -> None:
    """SIGKILL the driver at ``point`` inside batch ``KILLED``'s commit into a ``kind`` sink,
    restart on the checkpoint, and check that every batch was applied once."""
    changes = changelog(seed=23, keys=30, updates=45 * FILES)
    write_files(tmp_path / "in", records(changes), files=FILES)
    table = f"killed_{point.replace('-', '_')}_{kind}"
    url = sink_url(kind, tmp_path, postgres)
    spark_options = SparkOptions(max_files_per_trigger=1, key_buckets=4)
    config = workload_config(tmp_path / "in", tmp_path / "checkpoint", url, table, spark=spark_options)
    path = tmp_path / "config.json"
    path.write_text(config.to_json())
    killed = subprocess.run(
        [sys.executable, str(RUN_CONFIG), str(path)],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, KILL_POINT_VARIABLE: f"{point}:{KILLED}"},
    )
    assert killed.returncode == -9, killed.stderr[-3000:]
    reported = [json.loads(line)["batch_id"] for line in killed.stdout.splitlines() if '"batch_id"' in line]
    assert reported == list(range(KILLED))  # killed inside batch KILLED's commit, not elsewhere
    assert last_batch(config.sink.url, table) == (KILLED - 1 if point == "before-commit" else KILLED)

    result = run_pipeline(config, spark)  # the restart on the same checkpoint
    rerun = [batch for batch in result.batches if batch.batch_id == KILLED]
    assert len(rerun) == 1 and rerun[0].skipped == (point == "after-commit")
    assert normalized(read_table(config, spark)) == normalized(model_table(changes))
    assert last_batch(config.sink.url, table) == FILES - 1
