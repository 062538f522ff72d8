"""The package's modules and their import statements, read from the source (``ast``).

Shared by ``tests/test_layers.py`` (what each layer may import) and
``tests/test_import_cycles.py`` (no module imports itself through others): every module of
``upsertmat`` and its mapped subpackages, and every ``import`` / ``from ... import`` in it
(relative imports resolved; imports inside functions and ``TYPE_CHECKING`` blocks included).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import upsertmat
import upsertmat.conformance
import upsertmat.impls
import upsertmat.spec

ROOTS: dict[str, Path] = {
    module.__name__: Path(module.__file__ or "").parent
    for module in (upsertmat, upsertmat.spec, upsertmat.impls, upsertmat.conformance)
}
"""Package -> its folder: ``spec``, ``impls`` and ``conformance`` are top-level folders of the
source tree (the build maps them), so their modules are found through the imported packages."""


def module_name(path: Path) -> str:
    package, root = max(
        ((name, root) for name, root in ROOTS.items() if path.is_relative_to(root)),
        key=lambda item: len(item[1].parts),
    )
    parts = [*package.split("."), *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_files(package: str) -> list[Path]:
    """Every module file of ``package`` (``upsertmat`` alone: without the mapped subpackages)."""
    root = ROOTS[package]
    others = [other for name, other in ROOTS.items() if name != package and other.is_relative_to(root)]
    return sorted(path for path in root.rglob("*.py") if not any(path.is_relative_to(o) for o in others))


def imported_modules(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                prefix = ".".join(base)
                target = f"{prefix}.{node.module}" if node.module else prefix
            else:
                target = node.module or ""
            if node.module is None or target.count(".") <= 1:
                # ``from . import x`` / ``from upsertmat import x`` may import submodules
                for alias in node.names:
                    yield node.lineno, f"{target}.{alias.name}"
            else:
                yield node.lineno, target


def all_modules() -> dict[str, Path]:
    """Every module of the package (the mapped subpackages included) -> its file."""
    return {module_name(path): path for root in ROOTS for path in package_files(root)}
