"""The Spark tests of the Java helpers (:mod:`upsertmat.spark.javajars`) need a JDK's javac."""

from __future__ import annotations

import os

import pytest

from upsertmat.spark.javajars import find_javac


def require_javac() -> None:
    """Skip without a JDK's javac; in CI (which installs one) fail instead."""
    if find_javac() is None:
        message = "no javac (install a JDK, e.g. the Debian package openjdk-17-jdk-headless)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
