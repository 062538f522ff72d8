"""Which build of the implementations runs: compiled (mypyc) or pure Python.

The compiled build (setup.py) compiles the hot path — the strategies, the state classes and
the key encoding — to C extension modules that sit next to their ``.py`` files; Python imports
an extension module before a source file of the same name. :func:`build_name` says which one
this process imports (``upsertmat --version`` and the benchmark's JSON report it).

How an extra is installed is said here too, once (:func:`needs_extra`): upsertmat is on no
package index (README), so every hint for a missing extra names the install from a clone,
``pip install '.[EXTRA]'`` (the command line's, the pipeline's, the conformance plugin's and the
bench's; tests/test_install_lines.py holds every hint in the sources to it).
"""

from __future__ import annotations

import importlib.util
from importlib.machinery import EXTENSION_SUFFIXES

PROBE = "upsertmat.impls.strategies.common"
"""A module every compiled build compiles; where it comes from decides the build."""

COMPILED = "compiled with mypyc"
PURE = "pure Python"


def is_compiled(module: str = PROBE) -> bool:
    """Whether ``module`` is imported from a compiled extension module (no import is run)."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    return origin is not None and origin.endswith(tuple(EXTENSION_SUFFIXES))


def build_name() -> str:
    """``"compiled with mypyc"`` or ``"pure Python"``."""
    return COMPILED if is_compiled() else PURE


def install_hint(extra: str) -> str:
    """``install upsertmat with it, from its clone: pip install '.[EXTRA]'``: how the extra
    named just before is installed (from a clone, not an index: none has upsertmat)."""
    return f"install upsertmat with it, from its clone: pip install '.[{extra}]'"


def needs_extra(extra: str, detail: str = "") -> str:
    """``needs the 'EXTRA' extra DETAIL: install upsertmat with it, from its clone: pip install
    '.[EXTRA]'``, the words of every hint for a missing extra (its subject before it: "the
    pipeline ", "upsertmat gateway: "); ``detail`` (with its leading space) says what is missing."""
    return f"needs the '{extra}' extra{detail}: {install_hint(extra)}"
