"""The sink tests' PostgreSQL server: the Spark tests' session fixture (tests/spark/conftest.py)."""

from __future__ import annotations

from ..spark.conftest import postgres_url

__all__ = ["postgres_url"]
