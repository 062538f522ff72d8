"""One SparkSession for every Spark test (starting one costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from upsertmat.spark.session import build_session


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(app_name="upsertmat-tests")
    yield session
    session.stop()
