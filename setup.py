"""Package discovery for the mapped layout (the metadata is in pyproject.toml).

``[tool.setuptools.package-dir]`` maps the top-level folders ``spec/``, ``impls/`` and
``conformance/`` to ``upsertmat.spec``, ``upsertmat.impls`` and ``upsertmat.conformance``;
setuptools' own discovery cannot follow a mapping of subpackages, so the package list is
built here from that mapping: every folder with an ``__init__.py`` under each mapped root.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]["package-dir"]


def mapped_packages() -> list[str]:
    """Every package under every mapped root, by its import name."""
    packages = []
    for name, folder in PACKAGE_DIR.items():
        packages.append(name)
        packages += [
            f"{name}.{sub}" for sub in find_packages(str(HERE / folder)) if f"{name}.{sub}" not in PACKAGE_DIR
        ]
    return sorted(set(packages))


setup(packages=mapped_packages())
