"""A SIGKILL inside the SQL sinks' commit, at each kill point (:mod:`tests.spark.kill_points`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.sinks.base import KILL_POINTS

from .kill_points import kill_inside_the_commit

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture
def postgres(request: pytest.FixtureRequest) -> str | None:
    if "postgresql" not in request.node.name:
        return None
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.mark.parametrize("point", KILL_POINTS)
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_kill_inside_the_sinks_commit_leaves_every_batch_applied_once(
    spark: SparkSession, tmp_path: Path, kind: str, point: str, postgres: str | None
) -> None:
    kill_inside_the_commit(spark, tmp_path, kind, point, postgres)
