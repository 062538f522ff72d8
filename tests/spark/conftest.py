"""The Spark tests' PostgreSQL server (the SparkSession fixture ``spark`` is tests/conftest.py's,
shared with the gateway's Spark tests)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ..prerequisites import require
from .postgres import postgres_server, server_binaries


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A local PostgreSQL server (package ``postgresql``); fails in CI if it is not installed."""
    binaries = server_binaries()
    require(binaries is not None, "PostgreSQL's server binaries (initdb, pg_ctl: Debian's postgresql)")
    assert binaries is not None
    with postgres_server(binaries) as url:
        yield url
