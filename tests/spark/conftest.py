"""The Spark tests' PostgreSQL server (the SparkSession fixture ``spark`` is tests/conftest.py's,
shared with the gateway's Spark tests)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .postgres import postgres_server, server_binaries


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
