"""The tests that run Apache Flink need the ``flink`` extra (PyFlink 2.3.0); ``tox -e flink`` has it."""

from __future__ import annotations

import importlib.util

from upsertmat.impls.build import needs_extra

from .prerequisites import require


def require_pyflink() -> None:
    """Skip the calling test without PyFlink; in CI (whose ``flink`` env installs it) fail
    instead, so that the Flink tests never pass by not running (tests/prerequisites.py)."""
    found = importlib.util.find_spec("pyflink") is not None
    require(found, f"PyFlink: {needs_extra('flink')} (tox -e flink)")
