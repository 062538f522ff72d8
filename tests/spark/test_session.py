"""A local run is loopback-only and quiet: checked on real processes, not mocks.

The subprocess test starts its own JVM (as a user's ``upsertmat demo`` does), samples the
listening TCP sockets of the whole process tree from ``/proc`` while it runs, and checks that
the console carries only our output while Spark's and the Python workers' go to the log file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.spark.session import (
    CHECKPOINT_MANAGER_CONF,
    FILE_SYSTEM_CHECKPOINT_MANAGERS,
    LOG_ENV,
    file_system_checkpoint_manager,
    is_loopback_master,
    session_conf,
)

from .sockets import listening, outside_loopback

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_loopback_masters() -> None:
    for master in ("local", "local[2]", "local[*]", "local-cluster[2,1,1024]", "spark://127.0.0.1:7077"):
        assert is_loopback_master(master), master
    for master in ("spark://localhost:7077", "spark://[::1]:7077", "spark://127.0.1.1:7077"):
        assert is_loopback_master(master), master
    for master in ("spark://10.0.0.5:7077", "spark://example.com:7077", "yarn", "k8s://https://k:443"):
        assert not is_loopback_master(master), master


def test_the_shared_session_listens_on_loopback_only(spark: SparkSession) -> None:
    assert spark.range(10).count() == 10
    sockets = listening(os.getpid())
    assert sockets, "the driver should listen somewhere (py4j, RPC, block manager)"
    assert outside_loopback(sockets) == []


def test_quiet_demo_prints_only_results_and_listens_on_loopback_only(tmp_path: Path) -> None:
    log = tmp_path / "spark.log"
    environment = {**os.environ, LOG_ENV: str(log)}
    environment.pop("SPARK_LOCAL_IP", None)
    command = [sys.executable, "-m", "upsertmat", "demo", "--quiet", "--dir", str(tmp_path / "demo")]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment
    )
    seen: set[tuple[str, int]] = set()
    while process.poll() is None:
        seen.update(listening(process.pid))
        time.sleep(0.2)
    out, err = process.communicate()
    assert process.returncode == 0, err
    assert err == ""  # --quiet: nothing on stderr, Spark's start-up and worker chatter included
    assert out.startswith("upsertmat demo: 40 users")
    assert "Python worker" not in out and "WARN" not in out
    assert seen, "no listening socket seen while the demo ran"
    assert outside_loopback(sorted(seen)) == []
    text = log.read_text()
    assert "Python worker" in text  # the workers' chatter went to the log file


def test_progress_lines_and_the_log_path_on_stderr(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from upsertmat.cli import main

    assert main(["demo", "--dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert len(lines) >= 3
    assert all(line.startswith("upsertmat demo") for line in lines), lines
    assert lines[0] == "upsertmat demo: starting Spark (local[2]; about 15 s) ..."  # said at once
    assert "batch 0: 800 changes reached the sink -> 20 upserts, 20 deletes" in lines[1]
    assert "changes reaching the sink: 800 without the materializer" in captured.out
    assert f"kept in {tmp_path.resolve()}" in captured.out
    assert "(id 6, 19)" in captured.out


UI_PROBE = """
import os, sys, urllib.request
sys.path.insert(0, sys.argv[1])
from sockets import listening, outside_loopback
from upsertmat.spark.session import build_session
spark = build_session(ui=True)
port = int(spark.sparkContext.uiWebUrl.rsplit(":", 1)[1])
sockets = listening(os.getpid())
assert (("127.0.0.1", port) in sockets), (port, sockets)
assert outside_loopback(sockets) == [], sockets
urllib.request.urlopen(f"http://127.0.0.1:{port}/jobs/", timeout=10).read()
print("ui ok", port)
"""


def test_the_ui_when_asked_for_listens_on_loopback_only(tmp_path: Path) -> None:
    environment = {**os.environ, LOG_ENV: str(tmp_path / "spark.log")}
    environment.pop("SPARK_LOCAL_IP", None)
    done = subprocess.run(
        [sys.executable, "-c", UI_PROBE, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=180,
        env=environment,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ui ok")


def test_checkpoints_are_renamed_through_the_file_system_api(spark: SparkSession) -> None:
    # FileContext.rename forks a readlink process per rename on the local file system.
    manager = spark.conf.get(CHECKPOINT_MANAGER_CONF)
    assert manager in FILE_SYSTEM_CHECKPOINT_MANAGERS
    assert manager == file_system_checkpoint_manager(spark)


def test_the_jit_keeps_its_c2_tier() -> None:
    assert "TieredStopAtLevel" not in session_conf()["spark.driver.extraJavaOptions"]
