"""One SparkSession for every Spark test (starting one costs seconds)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from upsertmat.spark.session import build_session

from .postgres import postgres_server, server_binaries


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    session = build_session(app_name="upsertmat-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A local PostgreSQL server (package ``postgresql``); fails in CI if it is not installed."""
    binaries = server_binaries()
    if binaries is None:
        message = "PostgreSQL server binaries not found (install the Debian package 'postgresql')"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    with postgres_server(binaries) as url:
        yield url
