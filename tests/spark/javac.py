"""The Spark tests of the Java helpers (:mod:`upsertmat.spark.jvm.jars`) need a JDK's javac."""

from __future__ import annotations

from upsertmat.spark.jvm.jars import find_javac

from ..prerequisites import require


def require_javac() -> None:
    """Skip without a JDK's javac; in CI (which installs one) fail instead (tests/prerequisites.py)."""
    require(find_javac() is not None, "a JDK's javac (e.g. the Debian package openjdk-17-jdk-headless)")
