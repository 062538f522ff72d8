"""The gateway's collector thread runs the driver JVM's full collection on its period, not only
Python's (docs/gateway.md, Memory): counted with the JVM's own collector beans on the real
Spark session of the tests, not timed."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from pyspark.sql import SparkSession

from upsertmat.gateway import server

pytestmark = pytest.mark.spark


def full_collections(spark: SparkSession) -> int:
    """Collections so far by the JVM's old-generation collectors (the serial collector's
    ``MarkSweepCompact``; whatever collector runs, every bean but the young generation's)."""
    jvm: Any = spark.sparkContext._jvm
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    young = {"Copy", "PS Scavenge", "ParNew", "G1 Young Generation"}
    return sum(int(bean.getCollectionCount()) for bean in beans if str(bean.getName()) not in young)


def test_the_collector_runs_the_jvms_full_collection_on_its_period(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(server, "COLLECT_PERIOD_SECONDS", 0.02)
    monkeypatch.setattr(server, "JVM_COLLECT_PERIOD_SECONDS", 0.1)
    before = full_collections(spark)
    stop = threading.Event()
    thread = threading.Thread(target=server._collect, args=(stop, spark))
    thread.start()
    try:
        deadline = time.monotonic() + 30  # a bound, not a timing: three periods take 0.3 s
        while full_collections(spark) < before + 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert full_collections(spark) >= before + 3
