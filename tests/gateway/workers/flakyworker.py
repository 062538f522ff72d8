"""A Python worker for Spark that does not connect back the first N times it is started, then is
PySpark's own worker: the transient failure of a loaded machine, made for real (Spark waits its
fixed 10 s for the worker and raises its own exception).

Spark starts it with ``python -m flakyworker`` when ``spark.python.use.daemon=false`` and
``spark.python.worker.module=flakyworker`` (a ``spark-defaults.conf`` in ``SPARK_CONF_DIR``) and
this directory is on ``PYTHONPATH``. The environment, which Spark's workers inherit, says how
often to fail: ``FLAKY_WORKER_FAILS`` starts, counted in the file ``FLAKY_WORKER_COUNTER`` (one
byte per failed start; the file lock keeps two workers started at once from both failing one
count)."""

from __future__ import annotations

import fcntl
import os
import runpy
import sys


def should_fail() -> bool:
    """True for the first ``FLAKY_WORKER_FAILS`` starts (each one counted)."""
    allowed = int(os.environ.get("FLAKY_WORKER_FAILS", "1"))
    with open(os.environ["FLAKY_WORKER_COUNTER"], "a+b") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        if len(counter.read()) >= allowed:
            return False
        counter.write(b"x")
        return True


if __name__ == "__main__":
    if should_fail():
        sys.stderr.write("flakyworker: this start does not connect back\n")
        sys.exit(0)
    runpy.run_module("pyspark.worker", run_name="__main__", alter_sys=True)
