"""Project-wide test configuration.

The upsertmat plugin loads a Hypothesis profile only when the conformance suite is selected;
this project's own property tests use the same profiles: ``HYPOTHESIS_PROFILE`` (tox sets
``upsertmat-ci``), else ``upsertmat-dev``.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from upsertmat.conformance import profiles

from .prerequisites import MARKER_HELP, check_marks, require
from .tmproot import memory_temproot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytest_plugins = ["pytester"]

settings.load_profile(profiles.resolve(os.environ.get("HYPOTHESIS_PROFILE") or profiles.DEV))


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Temporary directories in memory when there is room (:mod:`tests.tmproot`): pytest reads
    ``PYTEST_DEBUG_TEMPROOT`` when it first makes its base directory, after this hook; the
    xdist workers are given a directory under the controller's."""
    config.addinivalue_line("markers", MARKER_HELP)
    if config.option.basetemp or hasattr(config, "workerinput"):
        return
    root = memory_temproot(os.environ)
    if root is not None:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(root)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The prerequisites marked with ``tests.prerequisites.requires``: skipped, or under CI failed."""
    check_marks(item)


@pytest.fixture(autouse=True, scope="session")
def temporary_files_under_basetemp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Temporary files of this process and of the processes it starts (``TMPDIR``) go under
    pytest's base directory, not /tmp: a process a test kills leaves its temporary state there
    (an LMDB state reserves 16 MB of disk), and it goes with the run's directories."""
    directory = tmp_path_factory.mktemp("tmp")
    before = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(directory)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = before
        tempfile.tempdir = None


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

    Needs root and a kernel that lets this process mount tmpfs: a prerequisite
    (tests/prerequisites.py: skipped locally, failed under CI, with mount's reason)."""
    size = getattr(request, "param", "3m")
    mount_point = tmp_path / "fs"
    mount_point.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    require(
        mounted.returncode == 0,
        f"a size-limited tmpfs (mount -t tmpfs, as root): {mounted.stderr.strip() or mounted.returncode}",
    )
    try:
        yield Tmpfs(mount_point)
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One SparkSession for every Spark test (tests/spark, tests/gateway; starting one costs
    seconds). PySpark is imported here, when a test asks for it: the pure env has no Spark."""
    from upsertmat.spark.session import build_session

    session = build_session(app_name="upsertmat-tests")
    yield session
    session.stop()


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def records(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.out.splitlines()]


Cli = Callable[..., Result]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Run the command line's ``main`` in-process; ``stdin=`` feeds standard input."""
    from upsertmat.cli import main

    def run(*argv: str | Path, stdin: str | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
        code = main([str(arg) for arg in argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
