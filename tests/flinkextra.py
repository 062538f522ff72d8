"""The tests that run Apache Flink need the ``flink`` extra (PyFlink 2.3.0); ``tox -e flink`` has it."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_pyflink() -> None:
    """Skip the calling test module without PyFlink; in CI (whose ``flink`` env installs it)
    fail instead, so that the Flink tests never pass by not running."""
    if importlib.util.find_spec("pyflink") is None:
        message = "needs the flink extra: pip install 'upsertmat[flink]' (tox -e flink)"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message, allow_module_level=True)
