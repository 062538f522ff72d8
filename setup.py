"""Package discovery for the mapped layout, and the compiled hot path (the metadata is in pyproject.toml).

**Packages.** ``[tool.setuptools.package-dir]`` maps the top-level folders ``spec/``, ``impls/``
and ``conformance/`` to ``upsertmat.spec``, ``upsertmat.impls`` and ``upsertmat.conformance``;
setuptools' own discovery cannot follow a mapping of subpackages, so the package list is built
here from that mapping: every folder with an ``__init__.py`` under each mapped root.

**The compiled build.** The modules of :data:`COMPILED` (the strategies, the state classes, the
key encoding; never ``spec/``, the oracle) are compiled ahead of time to C extension modules by
mypyc, from the same typed Python (docs/architecture.md, *The compiled build*). mypyc, like
mypy, names a module after the folders above its file, so the sources are first copied into
``build/mypyc-src/`` laid out by import name (``upsertmat/impls/state/heap.py``); the extensions
land next to the ``.py`` files in the wheel, and Python imports an extension module before a
source file of the same name. The ``.py`` files stay in the wheel (readable tracebacks point at
them; a pure build is the same files without the extensions).

* ``UPSERTMAT_PURE=1`` (any non-empty value but ``0``) builds the pure-Python wheel.
* Without a working C compiler the build says so in one line and installs the pure build.
* An editable install (``pip install -e .``) is always the pure build: compiled modules next to
  the sources would shadow every edit until the next rebuild.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).parent
PACKAGE_DIR: dict[str, str] = tomllib.loads((HERE / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]["package-dir"]

COMPILED: tuple[str, ...] = (
    "upsertmat.impls.encoding",
    "upsertmat.impls.state.codec",
    "upsertmat.impls.state.deferred",
    "upsertmat.impls.state.heap",
    "upsertmat.impls.state.named",
    "upsertmat.impls.state.rocksdb",
    "upsertmat.impls.state.spark",
    "upsertmat.impls.state.lmdb",
    "upsertmat.impls.strategies.adaptive",
    "upsertmat.impls.strategies.adaptive_heap",
    "upsertmat.impls.strategies.common",
    "upsertmat.impls.strategies.legacy",
    "upsertmat.impls.strategies.legacy_heap",
    "upsertmat.impls.strategies.linked_map",
    "upsertmat.impls.strategies.linked_map_heap",
    "upsertmat.impls.strategies.prefetch",
    "upsertmat.impls.strategies.sorted",
    "upsertmat.impls.strategies.sorted_heap",
    "upsertmat.impls.strategies.timers",
    "upsertmat.impls.strategies.value",
    "upsertmat.impls.strategies.value_heap",
    "upsertmat.impls.strategies.variants",
)
"""The modules the compiled build compiles, by import name (docs/architecture.md)."""

BUILDING = {"bdist_wheel", "build", "build_ext", "install", "bdist"}
"""Commands that build extensions; any other (``egg_info`` for pip's build requirements) skips mypyc."""

PLACEHOLDER = "upsertmat._mypyc_placeholder"
"""An extension name that only makes setuptools run ``build_ext`` (and tag the wheel for the
platform); :class:`CompileHotPath` replaces it with mypyc's extensions or drops it."""


def mapped_packages() -> list[str]:
    """Every package under every mapped root, by its import name."""
    packages = []
    for name, folder in PACKAGE_DIR.items():
        packages.append(name)
        packages += [
            f"{name}.{sub}" for sub in find_packages(str(HERE / folder)) if f"{name}.{sub}" not in PACKAGE_DIR
        ]
    return sorted(set(packages))


def source_of(module: str) -> Path:
    """The source file of ``module`` in the tree, through the package-dir mapping."""
    for package, folder in sorted(PACKAGE_DIR.items(), key=lambda item: -len(item[0])):
        if module == package or module.startswith(package + "."):
            rest = module[len(package) :].lstrip(".").split(".") if module != package else []
            path = HERE / folder / Path(*rest) if rest else HERE / folder / "__init__"
            if (path / "__init__.py").is_file():
                return path / "__init__.py"
            return path.with_suffix(".py")
    raise ValueError(f"{module} is under no mapped package")


def stage(root: Path) -> list[str]:
    """Copy every package of the tree into ``root`` laid out by import name; the paths of
    :data:`COMPILED` relative to ``root`` (what compiled code names in tracebacks:
    ``upsertmat/impls/state/heap.py``, as in the wheel)."""
    for package in mapped_packages():
        folder = source_of(package).parent
        target = root / Path(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for source in folder.glob("*.py"):
            shutil.copy2(source, target / source.name)
    return [str(Path(*name.split(".")).with_suffix(".py")) for name in COMPILED]


def pure_requested() -> bool:
    """``UPSERTMAT_PURE`` set to anything but empty or ``0``."""
    return os.environ.get("UPSERTMAT_PURE", "") not in ("", "0")


class CompileHotPath(build_ext):
    """``build_ext`` that compiles :data:`COMPILED` with mypyc, or builds nothing (and says
    why, in one line) for an editable install, a missing C compiler or mypyc failing to load."""

    def finalize_options(self) -> None:
        if not BUILDING & set(self.distribution.commands):  # metadata only (egg_info): no C to generate
            self.distribution.ext_modules = []
            super().finalize_options()
            return
        reason = self._why_pure()
        if reason is not None:
            print(f"upsertmat: pure-Python build ({reason})", file=sys.stderr, flush=True)
            self.distribution.ext_modules = []
        else:
            # Said before mypyc starts: the type analysis and the C compiler take minutes, and
            # pip shows this line only with -v (the README says so, and what to expect).
            print(
                f"upsertmat: compiling {len(COMPILED)} modules to C with mypyc, then the C compiler: "
                "several minutes on 2 cores (UPSERTMAT_PURE=1 installs the pure-Python build in seconds)",
                file=sys.stderr,
                flush=True,
            )
            self.distribution.ext_modules = self._mypycify()
        super().finalize_options()

    @staticmethod
    def _mypycify() -> list[Extension]:
        from mypyc.build import mypycify

        root = HERE / "build" / "mypyc-src"
        staged = stage(root)
        # mypyc gets its own mypy options, not the project's [tool.mypy] (strict, and it would
        # find pyproject.toml above the staging folder): the third-party packages are not
        # installed in the build environment, so their types are Any here.
        config = root / "mypyc.ini"
        config.write_text("[mypy]\n", encoding="utf-8")
        cwd = os.getcwd()
        os.chdir(root)
        try:
            extensions: list[Extension] = mypycify(
                [
                    f"--config-file={config}",
                    "--ignore-missing-imports",
                    "--follow-imports=silent",
                    *staged,
                ],
                opt_level="3",
                group_name="upsertmat",
                target_dir=str(HERE / "build" / "mypyc-c"),
            )
        finally:
            os.chdir(cwd)
        return extensions

    def _why_pure(self) -> str | None:
        if pure_requested():
            return "UPSERTMAT_PURE is set"
        if getattr(self, "editable_mode", False) or self.inplace:
            return "an editable install is always pure: compiled modules would shadow the sources"
        if not self._compiler_works():
            return "no working C compiler found"
        try:
            import mypyc.build  # noqa: F401
        except ImportError as error:
            return f"mypyc cannot be imported: {error}"
        return None

    def _compiler_works(self) -> bool:
        from setuptools._distutils.ccompiler import new_compiler
        from setuptools._distutils.sysconfig import customize_compiler

        compiler: Any = new_compiler()
        customize_compiler(compiler)
        with tempfile.TemporaryDirectory() as scratch:
            probe = Path(scratch) / "probe.c"
            probe.write_text("#include <Python.h>\nint upsertmat_probe(void) { return 0; }\n")
            try:
                from sysconfig import get_paths

                compiler.compile([str(probe)], output_dir=scratch, include_dirs=[get_paths()["include"]])
            except Exception:
                return False
        return True


setup(
    packages=mapped_packages(),
    ext_modules=[] if pure_requested() else [Extension(PLACEHOLDER, sources=[])],
    cmdclass={"build_ext": CompileHotPath},
)
