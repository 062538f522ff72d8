"""The pipeline on a real Spark standalone cluster (master + worker on 127.0.0.1): its driver
SIGKILLed mid-stream and restarted on the checkpoint leaves the same sink table as an
uninterrupted local run, every batch applied exactly once."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.jobs.runner import committed_batches
from upsertmat.spark import PipelineConfig
from upsertmat.spark.parts import SinkSpec
from upsertmat.spark.pipeline import read_table, run_pipeline
from upsertmat.spark.session import LOG_ENV

from .cluster import standalone_cluster
from .run_config import SCRIPT as RUN_CONFIG
from .sockets import descendants
from .test_recovery import count_batches, kill_mid_stream
from .workload import ONE_FILE, changelog, model_table, normalized, records, workload_config, write_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CLUSTER_PROCESS = re.compile(r"deploy\.master\.Master|deploy\.worker\.Worker|CoarseGrainedExecutorBackend")
FILES = 6
KILL_AFTER = 3  # as in test_recovery.kill_mid_stream


def run_driver(config: PipelineConfig, workdir: Path) -> dict[str, object]:
    """Run ``config`` to the end in a driver subprocess; its summary line."""
    path = workdir / "config-restart.json"
    path.write_text(config.to_json())
    done = subprocess.run(
        [sys.executable, str(RUN_CONFIG), str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, LOG_ENV: str(workdir / "driver-restart.log")},
        check=True,
    )
    summary: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def applications(web_port: int) -> int:
    """Applications the master has seen (running and completed)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as page:
        status = json.loads(page.read())
    return len(status.get("activeapps", [])) + len(status.get("completedapps", []))


def test_driver_killed_on_a_standalone_cluster_restarts_to_the_same_table(
    spark: SparkSession, tmp_path: Path
) -> None:
    changes = changelog(seed=13, keys=25, updates=400)
    write_files(tmp_path / "in", records(changes), files=FILES)
    with standalone_cluster(tmp_path / "cluster", workers=1, cores=2) as (master, web_port):
        on_cluster = replace(
            ONE_FILE,
            key_buckets=4,
            master=master,
            conf={"spark.executor.memory": "512m", "spark.cores.max": "2"},
        )
        url = f"sqlite:///{tmp_path / 'sink.db'}"
        config = workload_config(tmp_path / "in", tmp_path / "checkpoint", url, "cluster", spark=on_cluster)
        os.environ[LOG_ENV] = str(tmp_path / "driver-killed.log")
        try:
            assert kill_mid_stream(config, tmp_path) == KILL_AFTER
        finally:
            del os.environ[LOG_ENV]
        committed = count_batches(config, spark)
        assert KILL_AFTER <= committed < FILES
        summary = run_driver(config, tmp_path)
        assert summary["done"] is True
        assert applications(web_port) == 2  # both drivers ran their executors on the cluster
        # Spark's batches, which are not always the files: a kill between the file source's log
        # and the offsets log leaves two files that the next batch takes together.
        batches = committed_batches(tmp_path / "checkpoint")
        assert KILL_AFTER < batches <= FILES
        assert count_batches(config, spark) == batches  # each of them applied once
    local = replace(
        config,
        checkpoint=tmp_path / "checkpoint-local",
        sink=SinkSpec(f"sqlite:///{tmp_path / 'local.db'}", "local"),
        spark=replace(config.spark, master="local[2]", conf={}),
    )
    run_pipeline(local, spark)
    table = normalized(read_table(config, spark))
    assert table == normalized(read_table(local, spark))
    assert table == normalized(model_table(changes))
    # every cluster daemon and executor is gone (this process's own local JVM stays)
    assert [pid for pid in descendants(os.getpid()) if CLUSTER_PROCESS.search(command_line(pid))] == []


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
