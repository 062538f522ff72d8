"""``mypy --strict`` over the project, each file under the module name it is imported by.

mypy names a module after the folders above its file, so it would call ``spec/model.py``
``spec.model``. The package-dir mapping of ``pyproject.toml`` (``[tool.setuptools.package-dir]``)
makes it ``upsertmat.spec.model``, and no mypy option can say so. This runs mypy's own command
line's two steps (option parsing and the build; every flag, message and exit status is
mypy's) with one change between them: each source file under a mapped folder gets the module
name the mapping gives it. Usage: ``python
tools/typecheck.py [MYPY ARGS...]`` (``tox -e type`` runs it); the files and options are the
``[tool.mypy]`` section of ``pyproject.toml``.
"""

from __future__ import annotations

import sys
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path

import mypy.main
from mypy.fscache import FileSystemCache
from mypy.modulefinder import BuildSource
from mypy.util import FancyFormatter, count_stats

ROOT = Path(__file__).resolve().parent.parent


def package_dirs(root: Path = ROOT) -> dict[Path, str]:
    """Mapped folder (absolute) -> the package name it is imported as."""
    table = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = table["tool"]["setuptools"]["package-dir"]
    return {(root / folder).resolve(): name for name, folder in mapping.items()}


def module_name(path: Path, roots: dict[Path, str]) -> str | None:
    """The import name of ``path`` under the mapping, or None if no mapped folder holds it."""
    path = path.resolve()
    for folder, package in sorted(roots.items(), key=lambda item: len(item[0].parts), reverse=True):
        if path.is_relative_to(folder):
            parts = [*package.split("."), *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts)
    return None


def renamed(sources: Sequence[BuildSource], roots: dict[Path, str]) -> list[BuildSource]:
    """``sources`` with every mapped file under its import name."""
    result = []
    for source in sources:
        name = module_name(Path(source.path), roots) if source.path else None
        if name is None or name == source.module:
            result.append(source)
        else:
            result.append(BuildSource(source.path, name, source.text, base_dir=str(ROOT)))
    return result


def main(argv: Sequence[str]) -> int:
    """Run mypy on ``argv`` (plus the configured files) with the mapped module names.

    mypy's own ``main`` cannot be given other module names (it is compiled: patching its
    ``process_options`` has no effect), so this calls the two steps it is made of, then
    prints mypy's summary line and returns mypy's exit status.
    """
    started = time.time()
    fscache = FileSystemCache()
    sources, options = mypy.main.process_options(list(argv), fscache=fscache)
    sources = renamed(sources, package_dirs())
    _, messages, blockers = mypy.main.run_build(sources, options, fscache, started, sys.stdout, sys.stderr)
    errors, notes, files = count_stats(messages)
    formatter = FancyFormatter(sys.stdout, sys.stderr, options.hide_error_codes)
    if errors:
        print(formatter.format_error(errors, files, len(sources), blockers=blockers))
    elif not messages or notes == len(messages):
        print(formatter.format_success(len(sources), options.color_output))
    if messages and notes < len(messages):
        return 2 if blockers else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
