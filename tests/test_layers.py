"""The package's layering, checked on the source: ``conformance -> impls -> spec``, and the map
of the applications above them (docs/architecture.md, "The map of packages").

Every ``import`` and ``from ... import`` of every module under ``upsertmat/`` is read with
``ast`` (relative imports resolved, imports inside functions included) and checked:

- ``upsertmat.spec`` imports nothing else of upsertmat (it is the oracle);
- ``upsertmat.impls`` imports only ``impls`` and ``spec`` (never the applications: cli, replay,
  spark, bench, demo, jobs, plan, ...);
- ``upsertmat.conformance`` imports only ``conformance``, ``impls`` and ``spec``;
- each application package or module (``src/upsertmat/``) imports only what :data:`APPLICATIONS`
  gives it: the domain packages never import ``commands`` or ``cli``, and only ``cli`` imports
  ``commands`` (no module imports itself through others either: tests/test_import_cycles.py);
- only ``conformance`` imports pytest and Hypothesis (the ``conformance`` extra), and only
  ``bench`` imports matplotlib (the ``bench`` extra), so the library's runtime requirements are
  what the library needs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .imports import ROOTS, imported_modules, module_name, package_files

ALLOWED: dict[str, frozenset[str]] = {
    "spec": frozenset({"spec"}),
    "impls": frozenset({"impls", "spec"}),
    "conformance": frozenset({"conformance", "impls", "spec"}),
}
"""Layer -> the upsertmat subpackages its modules may import."""

LIBRARY = frozenset({"spec", "impls", "conformance"})
APPLICATIONS: dict[str, frozenset[str]] = {
    "": frozenset(),  # upsertmat/__init__.py: the version, nothing else
    "__main__": frozenset({"cli", "interrupt"}),
    "cli": frozenset({"", "commands", "errors", "interrupt", "stdout", "impls"}),
    "commands": frozenset(
        {"bench", "client", "conformance", "defaults", "demo", "errors", "gateway", "impls", "interrupt"}
        | {"jobs", "keycheck", "plan", "replay", "spark", "spec", "stdout"}
    ),
    "bench": frozenset({"client", "errors", "impls", "jobs", "sinks", "spark", "spec"}),
    "demo": frozenset({"impls", "interrupt", "jobs", "spark"}),
    "gateway": frozenset({"", "errors", "impls", "jobs", "plan", "sinks", "spark"}),
    "plan": frozenset({"impls", "jobs"}),
    "jobs": frozenset({"defaults", "errors", "impls", "interrupt", "sinks", "spark", "stdout"}),
    # the gateway's typed contract (gateway/contract.py) and the result types (jobs/results.py) only
    "client": frozenset({"gateway", "jobs"}),
    "keycheck": frozenset({"errors", "replay", "spec"}),
    "replay": frozenset({"errors", "impls", "interrupt", "spec", "stdout"}),
    "spark": frozenset({"impls", "interrupt", "sinks", "spec"}),
    "sinks": frozenset({"impls", "spec"}),  # impls: the install hint (impls/build.py) only
    "defaults": frozenset({"impls"}),
    "stdout": frozenset({"errors"}),
    "errors": frozenset({"impls"}),
    "interrupt": frozenset(),
}
"""Application package or module of ``src/upsertmat/`` -> the other parts of upsertmat it may
import (``""``: the top-level package itself, for ``__version__``). The map of
docs/architecture.md; a new arrow is a design decision: add it here and there."""

EXTRAS: dict[str, frozenset[str]] = {
    "pytest": frozenset({"conformance"}),
    "_pytest": frozenset({"conformance"}),
    "hypothesis": frozenset({"conformance"}),
    "matplotlib": frozenset({"bench"}),
}
"""Optional third-party package -> the only subpackages that may import it."""


def subpackage(module: str) -> str | None:
    """``upsertmat.impls.state.heap`` -> ``impls``; None for modules outside upsertmat."""
    parts = module.split(".")
    if parts[0] != "upsertmat":
        return None
    return parts[1] if len(parts) > 1 else ""


def violations(layer: str) -> list[str]:
    found = []
    for path in package_files(f"upsertmat.{layer}"):
        for line, module in imported_modules(path):
            target = subpackage(module)
            if target is not None and target not in ALLOWED[layer]:
                found.append(f"{path}:{line} imports {module}")
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_what_is_below_it(layer: str) -> None:
    assert violations(layer) == []


def application_of(module: str) -> str | None:
    """The application unit of ``module`` (``upsertmat.gateway.app`` -> ``gateway``,
    ``upsertmat.__version__`` -> ``""``), its layer for the library, None outside upsertmat."""
    unit = subpackage(module)
    if unit is None or unit in LIBRARY or unit in APPLICATIONS:
        return unit
    return ""  # a name of the top-level package (``from upsertmat import __version__``)


def test_the_applications_import_only_along_the_map() -> None:
    found = []
    units = set()
    for path in package_files("upsertmat"):
        owner = application_of(module_name(path))
        assert owner is not None
        units.add(owner)
        for line, module in imported_modules(path):
            target = application_of(module)
            if target is not None and target != owner and target not in APPLICATIONS[owner]:
                found.append(f"{path}:{line} imports {module} ({owner} -> {target} is not on the map)")
    assert found == []
    assert units == set(APPLICATIONS), "every application unit is on the map, and only those"


NARROW: dict[str, dict[str, frozenset[str]]] = {
    "client": {
        "gateway": frozenset({"upsertmat.gateway.contract"}),
        "jobs": frozenset({"upsertmat.jobs.results"}),
    },
}
"""Arrows of the map that allow some modules of the target only: ``client`` takes the gateway's
request and response models and the result types, and nothing else of either (the embedded
client's runs are ``jobs/``'s, which imports nothing of ``client``)."""


def test_narrow_arrows_import_only_their_modules() -> None:
    found = []
    for path in package_files("upsertmat"):
        targets = NARROW.get(application_of(module_name(path)) or "", {})
        for line, module in imported_modules(path):
            allowed = targets.get(application_of(module) or "")
            if allowed is not None and module not in allowed:
                found.append(f"{path}:{line} imports {module}")
    assert found == []


def test_optional_packages_are_imported_only_by_their_extra() -> None:
    found = []
    for path in (path for root in ROOTS for path in package_files(root)):
        owner = subpackage(module_name(path))
        for line, module in imported_modules(path):
            allowed = EXTRAS.get(module.split(".")[0])
            if allowed is not None and owner not in allowed:
                found.append(f"{path}:{line} imports {module}")
    assert found == []


def test_the_checker_sees_relative_and_nested_imports() -> None:
    # the rules are only as good as the import reader: check it on this package's own files
    modules = {module for _, module in imported_modules(ROOTS["upsertmat.conformance"] / "suite.py")}
    assert {subpackage(module) for module in modules} >= {"impls", "spec", "conformance"}
    assert "upsertmat.conformance.checks" in modules and "pytest" in modules
    plugin = {module for _, module in imported_modules(ROOTS["upsertmat.conformance"] / "plugin.py")}
    assert "upsertmat.conformance.misses" in plugin  # imported inside a function
    assert subpackage("upsertmat.commands.replay") == "commands" and subpackage("json") is None
    assert (
        module_name(ROOTS["upsertmat.impls"] / "strategies" / "legacy.py")
        == "upsertmat.impls.strategies.legacy"
    )


def test_bench_without_matplotlib_measures_and_skips_only_the_plots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util
    import json

    from upsertmat.cli import main
    from upsertmat.commands import bench as command

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a)
    )
    argv = ["--strategy", "VALUE", "--backend", "heap", "--upsert-key", "on", "--workload", "flip544"]
    argv += ["--retract-delay", "2", "--retract-percentage", "100", "--records", "50", "--repetitions", "1"]
    assert main(["bench", *argv, "--format", "json", "--quiet", "--output-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["results"][0]["status"] == "ok"
    assert captured.err == f"upsertmat bench: {command.PLOTS_SKIPPED}\n"
    assert "pip install '.[bench]'" in command.PLOTS_SKIPPED  # from a clone: no index has upsertmat
    assert sorted(path.name for path in tmp_path.iterdir()) == ["results.csv", "results.json"]
