"""A real Spark standalone cluster on 127.0.0.1, started from the installed pyspark (no download).

:func:`standalone_cluster` starts a master and ``workers`` workers with pyspark's
``bin/spark-class`` (``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``), every
port chosen free and bound to 127.0.0.1 (``--host`` and ``SPARK_LOCAL_IP``, which the web UIs
follow), waits until the master lists the workers as alive, yields the master URL, and on exit
stops every process it started and every process those started (executors), SIGKILL if they do
not end within seconds. Daemon logs go to ``<directory>/logs``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import pyspark

from .sockets import descendants

HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


def spark_class() -> Path:
    """pyspark's ``bin/spark-class``."""
    return Path(pyspark.__file__).parent / "bin" / "spark-class"


@contextmanager
def daemon(command: list[str], log: Path, environment: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """Run one daemon; on exit SIGTERM it and its descendants, SIGKILL what is left after 10 s."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        process = subprocess.Popen(
            command, stdout=out, stderr=subprocess.STDOUT, env=environment, start_new_session=True
        )
    try:
        yield process
    finally:
        stop_tree(process)


def stop_tree(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM ``process`` and its descendants; SIGKILL the ones still alive after 10 s."""
    tree = descendants(process.pid)
    for pid in tree:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(pid) for pid in tree):
        process.poll()
        time.sleep(0.1)
    for pid in tree:
        _signal(pid, signal.SIGKILL)
    process.wait(timeout=10)


def kill_tree(process: subprocess.Popen[Any]) -> None:
    """SIGKILL ``process`` and every process below it, as a crashed machine would stop them,
    and wait until all are gone. Killing its process group is not enough for a Spark driver:
    the JVM runs in a session of its own (``upsertmat.spark.session``: a terminal's Ctrl-C must
    reach only the driver), and a JVM that outlives its driver by a moment goes on writing the
    checkpoint, so a restart at once could meet Spark's "Concurrent update to the log"."""
    tree = descendants(process.pid)
    for pid in tree:
        _signal(pid, signal.SIGKILL)
    process.wait(timeout=30)
    deadline = time.monotonic() + 60
    while any(_alive(pid) for pid in tree[1:]):
        assert time.monotonic() < deadline, f"processes {tree} outlived SIGKILL"
        time.sleep(0.05)


def _signal(pid: int, number: signal.Signals) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, number)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def alive_workers(web_port: int) -> int:
    """Workers the master's JSON status page lists as ALIVE (0 while it is not up, or while the
    port answers with something else than the status: an HTML page while the UI starts)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{web_port}/json/", timeout=2) as page:
            status = json.loads(page.read())
    except (OSError, ValueError):
        return 0
    if not isinstance(status, dict):
        return 0
    return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")


@contextmanager
def standalone_cluster(
    directory: Path, workers: int = 1, cores: int = 1, memory: str = "1g", timeout: float = 120
) -> Iterator[tuple[str, int]]:
    """A master and ``workers`` workers on 127.0.0.1; yields (``spark://127.0.0.1:PORT``, the
    master's web UI port, whose ``/json/`` page lists workers and applications)."""
    environment = {
        **os.environ,
        "SPARK_LOCAL_IP": HOST,
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_LOG_DIR": str(directory / "logs"),
        "SPARK_WORKER_DIR": str(directory / "work"),
    }
    master_port, master_web = free_port(), free_port()
    url = f"spark://{HOST}:{master_port}"
    with ExitStack() as stack:
        stack.enter_context(
            daemon(
                [
                    str(spark_class()),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    HOST,
                    "--port",
                    str(master_port),
                    "--webui-port",
                    str(master_web),
                ],
                directory / "logs" / "master.log",
                environment,
            )
        )
        for number in range(workers):
            stack.enter_context(
                daemon(
                    [
                        str(spark_class()),
                        "org.apache.spark.deploy.worker.Worker",
                        "--host",
                        HOST,
                        "--port",
                        str(free_port()),
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        str(cores),
                        "--memory",
                        memory,
                        "--work-dir",
                        str(directory / "work" / f"worker-{number}"),
                        url,
                    ],
                    directory / "logs" / f"worker-{number}.log",
                    environment,
                )
            )
        deadline = time.monotonic() + timeout
        while alive_workers(master_web) < workers:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the standalone cluster did not come up in {timeout} s: see {directory}")
            time.sleep(0.5)
        yield url, master_web
