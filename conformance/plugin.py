"""The pytest plugin (entry point ``pytest11: upsertmat``): it stays out of other projects' way.

Loaded by pytest wherever upsertmat is installed, so it imports nothing heavy at import time
(no Hypothesis, no implementation) and changes nothing unless the suite is *selected*:

1. ``--upsertmat-impl=NAME`` (or ``--upsertmat-cmd "PROGRAM ARGS..."``, a program speaking
   the JSON Lines protocol of ``upsertmat replay``, see ``protocol``) runs the whole
   conformance suite against NAME — a registry name
   (``LEGACY/heap``), an alias (``legacy-list``) or a third party's ``package.module:factory``
   (a callable ``(Keys, Settings) -> Materializer``) — even in a directory without tests: the
   suite module shipped as ``upsertmat.conformance.selected`` is added to what pytest collects.
   The invocation directory is importable for ``module:factory`` names.
2. The suite is also selected when a collected test class subclasses ``MaterializerTests`` or
   ``StateBackendTests``.
3. Only then is a Hypothesis profile loaded (``profiles``): ``--hypothesis-profile`` wins
   (Hypothesis loads it); else the one named by ``HYPOTHESIS_PROFILE``; else ``upsertmat-dev``
   unless a profile of the user's own is loaded already. In any other pytest session the
   Hypothesis settings are left untouched.
4. Rule-7 misses seen by the suite are counted and reported in one summary line (``misses``),
   and so are the failures of an implementation that behaves as if it had no TTL, with the hint
   to declare ``upsertmat.spec.Unsupported``.
5. ``--upsertmat-quick`` is for first contact: Hypothesis does not shrink (a failure shows the
   example as found, at once) and the run stops at the first failing test (``-x``).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Generator
from pathlib import Path
from types import ModuleType

import pytest

OPTION = "--upsertmat-impl"
CMD_OPTION = "--upsertmat-cmd"
GRANULARITY_OPTION = "--upsertmat-ttl-granularity"
QUICK_OPTION = "--upsertmat-quick"
PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"

_SUITE_CLASSES = (
    ("upsertmat.conformance.suite", "MaterializerTests"),
    ("upsertmat.conformance.backends", "StateBackendTests"),
    ("upsertmat.conformance.backends", "PersistentBackendTests"),
)
_loaded_profile: list[str] = []  # the profile this plugin loaded for the selected suite
_ttl_ignored: list[str] = []  # node ids of the tests failed as if the implementation had no TTL


def extra_hint() -> str:
    """The conformance suite's missing-extra hint (:func:`upsertmat.impls.build.needs_extra`,
    imported only then: loading this plugin imports no implementation)."""
    from ..impls.build import needs_extra

    return f"the conformance suite {needs_extra('conformance')}"


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--upsertmat-impl``, ``--upsertmat-cmd`` and ``--upsertmat-ttl-granularity``."""
    group = parser.getgroup("upsertmat", "upsertmat conformance suite")
    group.addoption(
        OPTION,
        dest="upsertmat_impl",
        default=None,
        metavar="NAME",
        help="run the upsertmat conformance suite against NAME: STRATEGY/backend, an alias, "
        "or package.module:factory (a callable (Keys, Settings) -> Materializer)",
    )
    group.addoption(
        QUICK_OPTION,
        dest="upsertmat_quick",
        action="store_true",
        help="first contact: Hypothesis does not shrink (a failure shows the example as found, not "
        "a minimal one) and the run stops at the first failing test (like -x)",
    )
    _add_program_options(group)


def _add_program_options(group: pytest.OptionGroup) -> None:
    group.addoption(
        CMD_OPTION,
        dest="upsertmat_cmd",
        default=None,
        metavar="COMMAND",
        help="run the upsertmat conformance suite against a program speaking the JSON Lines "
        "protocol of `upsertmat replay` (stdin changes and clock lines, stdout {in, op, row}); "
        "keys and settings are appended as --pk, --upsert-key and --set KEY=VALUE; a {STATE} "
        "placeholder enables split runs (docs/conformance.md)",
    )
    group.addoption(
        "--upsertmat-scenarios-in-session",
        dest="upsertmat_scenarios_in_session",
        action="store_true",
        help="with --upsertmat-cmd: feed the scenarios to the running program on rewritten sink keys "
        "instead of one process each (for programs slow to start, e.g. a JVM)",
    )
    group.addoption(
        GRANULARITY_OPTION,
        dest="upsertmat_ttl_granularity",
        default=None,
        choices=("per_element", "per_key"),
        help="the TTL granularity of the program under --upsertmat-cmd: per_element (default) or "
        "per_key (one stamp per sink key, like LEGACY)",
    )


def _load_profile(config: pytest.Config) -> None:
    """Load the suite's profile (once); a usage error for an unknown ``HYPOTHESIS_PROFILE``."""
    if _loaded_profile:
        return
    try:
        from . import profiles
    except ImportError as error:
        raise pytest.UsageError(f"{extra_hint()} ({error})") from None
    chosen = config.getoption("hypothesis_profile", default=None)
    if chosen:
        _loaded_profile.append(str(chosen))  # Hypothesis's own plugin loads it
        return
    name = os.environ.get(PROFILE_VARIABLE)
    try:
        _loaded_profile.append(profiles.load(name))
    except Exception as error:
        raise pytest.UsageError(f"{PROFILE_VARIABLE}={name!r}: {error}") from None


def _check_implementation(config: pytest.Config, name: str) -> None:
    """Fail early and clearly if NAME names nothing; make ``module:factory`` importable."""
    from ..impls import UnknownImplementation, resolve
    from ..impls.registry import load_factory

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


def selected_command(config: pytest.Config) -> str | None:
    """The ``--upsertmat-cmd`` value of this run, or None."""
    value = config.getoption("upsertmat_cmd", default=None)
    return str(value) if value else None


def selected_granularity(config: pytest.Config) -> str | None:
    """The ``--upsertmat-ttl-granularity`` value of this run, or None."""
    value = config.getoption("upsertmat_ttl_granularity", default=None)
    return str(value) if value else None


def suite_path() -> Path:
    """The file of the shipped suite module collected for ``--upsertmat-impl``."""
    return Path(__file__).with_name("selected.py")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """With ``--upsertmat-impl``: load the profile and add the shipped suite to the collection.

    Runs before Hypothesis's own plugin, so ``--hypothesis-profile=upsertmat-...`` finds the
    suite's profiles registered (registering adds names; it loads nothing).
    """
    requested = config.getoption("hypothesis_profile", default=None)
    if isinstance(requested, str) and requested.startswith("upsertmat-"):
        try:
            from . import profiles  # noqa: F401  (registers them)
        except ImportError as error:
            raise pytest.UsageError(f"{extra_hint()} ({error})") from None
    if config.getoption("upsertmat_quick", default=False) and not config.option.maxfail:
        config.option.maxfail = 1
    name = selected_implementation(config)
    command = selected_command(config)
    if name is None and command is None:
        return
    if name is not None and command is not None:
        raise pytest.UsageError(f"{OPTION} and {CMD_OPTION} exclude each other: give one")
    _load_profile(config)
    if name is not None:
        _check_implementation(config, name)
    if not any(_names_suite(arg, config) for arg in config.args):
        config.args.append(str(suite_path()))


def _names_suite(arg: str, config: pytest.Config) -> bool:
    """True if a command-line argument is the suite file, or one of its tests (``PATH::NAME``)."""
    path = Path(arg.split("::", 1)[0])
    if not path.is_absolute():
        path = config.invocation_params.dir / path
    return path.resolve() == suite_path().resolve()


SUITE_MODULE = "upsertmat.conformance.selected"


class _SuiteModule(pytest.Module):
    """The shipped suite module, imported by its package name, never from its file's path.

    pytest imports a collected file under a name derived from the folders above it; in a source
    tree the suite's folder is ``conformance/``, which the build maps to ``upsertmat.conformance``,
    so that name would be wrong (and its relative imports would fail).
    """

    def _getobj(self) -> ModuleType:
        return importlib.import_module(SUITE_MODULE)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.Module | None:
    """Collect the shipped suite file as :data:`SUITE_MODULE` (see :class:`_SuiteModule`)."""
    if module_path != suite_path():
        return None
    # Node ids are paths relative to the rootdir, and the suite file lies outside it: give its
    # path from the rootdir (pytest prints it relative to the invocation directory), so that a
    # failing test's id, passed back to pytest as printed, runs that test.
    nodeid = os.path.relpath(module_path, parent.config.rootpath)
    return _SuiteModule.from_parent(parent, path=module_path, nodeid=nodeid)


def _is_suite_class(cls: object) -> bool:
    if not isinstance(cls, type):
        return False
    for module, name in _SUITE_CLASSES:
        base = getattr(sys.modules.get(module), name, None)
        if isinstance(base, type) and issubclass(cls, base):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A collected suite subclass selects the suite: load its profile before anything runs."""
    if any(_is_suite_class(getattr(item, "cls", None)) for item in items):
        _load_profile(config)


def pytest_collection_finish(session: pytest.Session) -> None:
    """With ``--upsertmat-quick``: the suite's profile without shrinking (after every plugin
    loaded its profile: Hypothesis loads ``--hypothesis-profile`` itself)."""
    if not _loaded_profile or not session.config.getoption("upsertmat_quick", default=False):
        return
    from hypothesis import Phase, settings

    current = settings.get_current_profile_name()
    if current.endswith("-quick"):
        return
    settings.register_profile(
        f"{current}-quick",
        parent=settings.get_profile(current),
        phases=(Phase.explicit, Phase.reuse, Phase.generate),
        report_multiple_bugs=False,
    )
    settings.load_profile(f"{current}-quick")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Note the failures of an implementation that behaves as if it had no TTL (suite only)."""
    report = yield
    if _loaded_profile and report.failed and call.excinfo is not None:
        mismatch = sys.modules.get("upsertmat.conformance.mismatch")
        found = mismatch.find_mismatch(call.excinfo.value) if mismatch is not None else None
        if found is not None and found.diagnosis.ttl_ignored:
            _ttl_ignored.append(report.nodeid)
    return report


def pytest_report_header(config: pytest.Config) -> list[str]:
    """Name the profile and the implementation under test (only when the suite is selected)."""
    name = selected_implementation(config) or selected_command(config)
    if name is None:
        return []
    profile = (
        [f"upsertmat: hypothesis profile {_loaded_profile[0]!r}{_quick(config)}"] if _loaded_profile else []
    )
    return [*profile, f"upsertmat: conformance suite against {name}"]


def _quick(config: pytest.Config) -> str:
    if not config.getoption("upsertmat_quick", default=False):
        return ""
    return " (--upsertmat-quick: no shrinking, stops at the first failure)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Name the profile the suite ran with; count its rule-7 misses (logged at DEBUG only)."""
    if not _loaded_profile:
        return
    quick = _quick(terminalreporter.config)
    terminalreporter.write_line(
        f"upsertmat: the suite ran with hypothesis profile {_loaded_profile[0]!r}{quick}"
    )
    if _ttl_ignored:
        from .mismatch import TTL_HINT

        count = len(_ttl_ignored)
        terminalreporter.write_line(
            f"upsertmat: {count} TTL test(s) failed as if the implementation had no TTL: {TTL_HINT}"
        )
    from .misses import MISSES

    if MISSES.count:
        terminalreporter.write_line(
            f"upsertmat: {MISSES.count} retraction(s) matched no stored row during the suite "
            "(rule 7, expected in generated streams; --log-level=DEBUG shows them)"
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop the programs under test that are still running (``--upsertmat-cmd`` sessions)."""
    session = sys.modules.get("upsertmat.conformance.program.session")
    if session is not None:
        session.close_all()
