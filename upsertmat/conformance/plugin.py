"""The pytest plugin (entry point ``pytest11: upsertmat``), active wherever upsertmat is installed.

1. Hypothesis profiles ``dev`` (fast), ``ci`` (derandomized, no deadline, no database) and
   ``nightly`` (many examples). Unless ``--hypothesis-profile`` is given, the profile named by
   the environment variable ``HYPOTHESIS_PROFILE`` is loaded; without it, ``dev`` is loaded
   if no other profile was loaded before (so a user's own choice is kept).
2. ``--upsertmat-impl=NAME`` runs the whole conformance suite against NAME — a registry name
   (``LEGACY/heap``), an alias (``legacy-list``) or a third party's ``package.module:factory``
   (a callable ``(Keys, Settings) -> Materializer``) — even in a directory without tests: the
   suite module shipped as ``upsertmat.conformance.selected`` is added to what pytest collects.
   The invocation directory is importable for ``module:factory`` names.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from ..impls import UnknownImplementation, resolve
from ..impls.registry import load_factory

OPTION = "--upsertmat-impl"
PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"

settings.register_profile("dev", max_examples=25, deadline=None)
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "nightly", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--upsertmat-impl``."""
    group = parser.getgroup("upsertmat", "upsertmat conformance suite")
    group.addoption(
        OPTION,
        dest="upsertmat_impl",
        default=None,
        metavar="NAME",
        help="run the upsertmat conformance suite against NAME: STRATEGY/backend, an alias, "
        "or package.module:factory (a callable (Keys, Settings) -> Materializer)",
    )


def _load_profile(config: pytest.Config) -> None:
    if config.getoption("hypothesis_profile", default=None):
        return  # Hypothesis's own plugin loads it
    name = os.environ.get(PROFILE_VARIABLE)
    if name:
        try:
            settings.load_profile(name)
        except Exception as error:
            raise pytest.UsageError(f"{PROFILE_VARIABLE}={name!r}: {error}") from None
    elif settings.get_current_profile_name() == "default":
        settings.load_profile("dev")


def _check_implementation(config: pytest.Config, name: str) -> None:
    """Fail early and clearly if NAME names nothing; make ``module:factory`` importable."""
    try:
        if ":" in name:
            directory = str(config.invocation_params.dir)
            if directory not in sys.path:
                sys.path.append(directory)
            load_factory(name)
        else:
            resolve(name)
    except (UnknownImplementation, ImportError, AttributeError) as error:
        raise pytest.UsageError(f"{OPTION}={name}: {error}") from None


def selected_implementation(config: pytest.Config) -> str | None:
    """The ``--upsertmat-impl`` value of this run, or None."""
    value = config.getoption("upsertmat_impl", default=None)
    return str(value) if value else None


def suite_path() -> Path:
    """The file of the shipped suite module collected for ``--upsertmat-impl``."""
    from . import selected

    return Path(selected.__file__)


def pytest_configure(config: pytest.Config) -> None:
    """Load the Hypothesis profile; add the shipped suite when ``--upsertmat-impl`` is given."""
    _load_profile(config)
    name = selected_implementation(config)
    if name is None:
        return
    _check_implementation(config, name)
    path = str(suite_path())
    if path not in config.args:
        config.args.append(path)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Name the profile and the implementation under test."""
    lines = [f"upsertmat: hypothesis profile {settings.get_current_profile_name()!r}"]
    name = selected_implementation(config)
    if name is not None:
        lines.append(f"upsertmat: conformance suite against {name}")
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say how many rule-7 misses the suite saw (logged at DEBUG only, see ``misses``)."""
    from .misses import MISSES

    if MISSES.count:
        terminalreporter.write_line(
            f"upsertmat: {MISSES.count} retraction(s) matched no stored row during the suite "
            "(rule 7, expected in generated streams; --log-level=DEBUG shows them)"
        )
