"""The scripts of ``tools/`` for the tests that check them.

``tools/`` is not a package: each script runs as ``python tools/NAME.py`` against the installed
upsertmat (our own measurements and checks, not shipped in the wheel). :func:`load` imports one
by its file, once per process, under the name ``tools.NAME``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOLS = Path(__file__).resolve().parent.parent / "tools"


def load(name: str) -> ModuleType:
    """The module of ``tools/NAME.py`` (executed on first use; its dataclasses need it in
    ``sys.modules`` while it runs)."""
    qualified = f"tools.{name}"
    if qualified in sys.modules:
        return sys.modules[qualified]
    spec = importlib.util.spec_from_file_location(qualified, TOOLS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[qualified] = module
    spec.loader.exec_module(module)
    return module
