"""A SIGKILL inside the lakehouse sinks' commit, at each kill point
(:mod:`tests.spark.kill_points`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.sinks.base import KILL_POINTS

from .kill_points import kill_inside_the_commit

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.mark.parametrize("point", KILL_POINTS)
@pytest.mark.parametrize("kind", ["delta", "iceberg", "paimon"])
def test_a_kill_inside_the_sinks_commit_leaves_every_batch_applied_once(
    spark: SparkSession, tmp_path: Path, kind: str, point: str
) -> None:
    kill_inside_the_commit(spark, tmp_path, kind, point)
