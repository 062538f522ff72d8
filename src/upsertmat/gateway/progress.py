"""Spark's progress reports of the gateway's queries, fed to the metrics (source rows read).

A :class:`~pyspark.sql.streaming.StreamingQueryListener` registered once on the gateway's
session; each query is named ``upsertmat_<job id>``, so a report names its job. The listener
runs on PySpark's callback thread and only counts. O(1) per report.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.streaming.listener import StreamingQueryListener

from .metrics import JobMetrics

QUERY_PREFIX = "upsertmat_"


class ProgressListener(StreamingQueryListener):
    """Adds each report's ``numInputRows`` to its job's ``changes_in`` counter."""

    def __init__(self, metrics: JobMetrics) -> None:
        self.metrics = metrics

    def onQueryStarted(self, event: Any) -> None:
        return None

    def onQueryProgress(self, event: Any) -> None:
        progress = event.progress
        name = str(progress.name or "")
        if name.startswith(QUERY_PREFIX) and progress.numInputRows:
            self.metrics.read(name[len(QUERY_PREFIX) :], int(progress.numInputRows))

    def onQueryIdle(self, event: Any) -> None:
        return None

    def onQueryTerminated(self, event: Any) -> None:
        return None


def listen(spark: SparkSession, metrics: JobMetrics) -> ProgressListener:
    """Register a :class:`ProgressListener` on ``spark``; the listener."""
    listener = ProgressListener(metrics)
    spark.streams.addListener(listener)
    return listener
