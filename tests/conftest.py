"""Project-wide test configuration.

The upsertmat plugin loads a Hypothesis profile only when the conformance suite is selected;
this project's own property tests use the same profiles: ``HYPOTHESIS_PROFILE`` (tox sets
``upsertmat-ci``), else ``upsertmat-dev``.
"""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from upsertmat.conformance import profiles

pytest_plugins = ["pytester"]

settings.load_profile(profiles.resolve(os.environ.get("HYPOTHESIS_PROFILE") or profiles.DEV))

SPARK_GROUP = "spark"
"""The pytest-xdist group of every test that starts Spark: under ``-n 2 --dist loadgroup`` (tox)
they all run on one worker, in one session-scoped SparkSession, one JVM at a time, while the
other worker runs the CPU-bound rest."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Put the tests marked ``spark`` into :data:`SPARK_GROUP` (a no-op without xdist)."""
    for item in items:
        if item.get_closest_marker("spark") is not None:
            item.add_marker(pytest.mark.xdist_group(SPARK_GROUP))


class Tmpfs:
    """A size-limited tmpfs mounted at ``tmp_path/fs``: a real full disk for the tests."""

    def __init__(self, mount_point: Path) -> None:
        self.path = mount_point

    def resize(self, size: str) -> None:
        """Remount with ``size`` (e.g. ``256m``): the disk has room again."""
        subprocess.run(["mount", "-o", f"remount,size={size}", str(self.path)], check=True)


@pytest.fixture
def small_tmpfs(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Tmpfs]:
    """A tmpfs of ``request.param`` (default ``3m``) at ``tmp_path/fs``, unmounted afterwards.

    Needs root and a kernel that lets this process mount tmpfs; the test is skipped with the
    reason otherwise."""
    size = getattr(request, "param", "3m")
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a size-limited tmpfs here: {mounted.stderr.strip()}")
    try:
        yield Tmpfs(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)
