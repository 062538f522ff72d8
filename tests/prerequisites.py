"""What a test needs from the machine, and the one rule for when it is missing.

A prerequisite is something outside the test that ``.ci/run`` provides (installs or has): a
binary (``javac``, PostgreSQL's server, ``chromium``), a device (``/dev/full``), a kernel
feature (mounting a size-limited tmpfs as root), a package of an extra. Locally a missing one
skips the test, with a reason naming it; under CI (``CI`` set to anything but empty, ``0`` or
``false``, as ``.ci/run`` runs) it fails the test, so a green CI run never hides a test it did
not run. Use :func:`require` inside a test or fixture (or at a module's top, which it skips or
fails whole), :func:`require_module` for an import, :func:`requires` as a marker on a test or a
module (tests/conftest.py applies it at set-up). tests/test_prerequisites.py checks that no test
file skips on its own.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest

MARKER = "prerequisite"
"""The marker :func:`requires` sets: ``prerequisite(available, what)``."""

MARKER_HELP = (
    f"{MARKER}(available, what): skipped when not available, failed under CI (tests/prerequisites.py)"
)
"""The marker's line in ``pytest --markers`` (registered by tests/conftest.py)."""


def in_ci() -> bool:
    """Whether this run is CI's: ``CI`` set to anything but empty, ``0`` or ``false``."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def require(condition: bool, what: str) -> None:
    """Nothing when ``condition`` holds; else skip the calling test (locally) or fail it (in CI),
    saying ``what`` is missing (``what`` names it and how to get it: "/dev/full", "PostgreSQL
    server binaries (the Debian package postgresql)")."""
    if condition:
        return
    message = f"missing prerequisite: {what}"
    if in_ci():
        pytest.fail(f"{message} (CI provides every prerequisite: .ci/run)", pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require_module(name: str, what: str) -> ModuleType:
    """The module ``name`` imported, as :func:`pytest.importorskip`, but under :func:`require`'s
    rule: skipped locally, failed in CI when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as error:
        missing = f"{what} ({error})"
    require(False, missing)  # outside the except: the report shows no chained ImportError
    raise AssertionError("not reached: require raised")


def requires(available: bool, what: str) -> pytest.MarkDecorator:
    """A marker for a test or a module (``pytestmark = requires(...)``) that applies
    :func:`require` when each test is set up; ``available`` is evaluated at import."""
    mark: pytest.MarkDecorator = getattr(pytest.mark, MARKER)
    return mark(available, what)


def check_marks(item: pytest.Item) -> None:
    """:func:`require` for each :func:`requires` marker of ``item`` (tests/conftest.py calls it
    when each test is set up)."""
    for mark in item.iter_markers(MARKER):
        require(*mark.args)
