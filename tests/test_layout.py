"""The mapped layout: ``spec/``, ``impls/`` and ``conformance/`` are top-level folders of the
source tree, imported as ``upsertmat.spec``, ``upsertmat.impls`` and ``upsertmat.conformance``.

Whatever was installed (the wheel under tox, an editable install by hand), every module file of
the source tree must be importable under the name the mapping gives it, from one file with the
same text, and the build must hold no module the tree does not have.
"""

from __future__ import annotations

import importlib
import importlib.util
import tomllib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

TREE = Path(__file__).resolve().parent.parent
MAPPING: dict[str, str] = tomllib.loads((TREE / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]["package-dir"]


def tree_modules() -> dict[str, Path]:
    """Import name -> source file, for every module of every mapped folder of the tree."""
    folders = {name: (TREE / folder).resolve() for name, folder in MAPPING.items()}
    modules: dict[str, Path] = {}
    for name, folder in folders.items():
        nested = [other for other in folders.values() if other != folder and other.is_relative_to(folder)]
        for path in folder.rglob("*.py"):
            if (
                any(path.is_relative_to(other) for other in nested)
                or not (path.parent / "__init__.py").exists()
            ):
                continue
            parts = [*name.split("."), *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def test_every_folder_of_modules_is_a_package() -> None:
    # A folder of modules without __init__.py imports as a namespace package from an editable
    # install, but setuptools leaves it out of the wheel.
    missing = []
    for folder in MAPPING.values():
        for path in (TREE / folder).rglob("*.py"):
            if not (path.parent / "__init__.py").exists():
                missing.append(str(path.parent.relative_to(TREE)))
    assert sorted(set(missing)) == []


def test_the_top_level_shows_the_three_parts() -> None:
    application = TREE / MAPPING["upsertmat"]
    for folder in ("spec", "impls", "conformance"):
        assert (TREE / folder / "__init__.py").is_file(), folder
        assert not (application / folder).exists(), f"{application / folder}: two paths for one module"
        assert MAPPING[f"upsertmat.{folder}"] == folder


def test_no_top_level_folder_shadows_the_installed_package() -> None:
    # Python puts the working directory first on sys.path (python -m, Spark's Python workers):
    # a top-level upsertmat/ would be imported instead of the installed package, without the
    # mapped subpackages.
    assert not (TREE / "upsertmat").exists()
    assert MAPPING["upsertmat"] == "src/upsertmat"


def test_a_python_started_in_the_clone_imports_the_whole_package() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", "import upsertmat.impls.registry, upsertmat.cli; print('ok')"],
        cwd=TREE,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.stdout.strip() == "ok", done.stderr


@pytest.mark.parametrize("name", sorted(tree_modules()))
def test_every_module_of_the_tree_is_installed_under_its_mapped_name(name: str) -> None:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, f"{name} is not importable"
    installed = Path(spec.origin)
    if installed.name.endswith(tuple(EXTENSION_SUFFIXES)):  # the compiled build: its source ships beside it
        installed = installed.parent / f"{name.rpartition('.')[2]}.py"
    assert installed.read_bytes() == tree_modules()[name].read_bytes(), f"{installed} differs from the tree"


def test_the_build_holds_no_module_the_tree_lacks() -> None:
    tree = set(tree_modules())
    found: set[str] = set()
    for package in ("upsertmat", "upsertmat.spec", "upsertmat.impls", "upsertmat.conformance"):
        module = importlib.import_module(package)
        for root in module.__path__:
            for path in Path(root).rglob("*.py"):
                if (path.parent / "__init__.py").exists():
                    relative = path.relative_to(root).with_suffix("").parts
                    parts = [*package.split("."), *relative]
                    if parts[-1] == "__init__":
                        parts.pop()
                    found.add(".".join(parts))
    assert found - tree == set()
