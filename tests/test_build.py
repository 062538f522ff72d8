"""Which build runs (compiled with mypyc, or pure Python), and what the compiled build leaves alone.

tox runs the suite on both builds and says which one each env must be (``UPSERTMAT_EXPECT_BUILD``:
``compiled`` or ``pure``), so a compiler that silently failed cannot pass for the compiled run.
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import upsertmat.spec
from upsertmat.impls.build import COMPILED, PURE, build_name, is_compiled


@pytest.mark.skipif("UPSERTMAT_EXPECT_BUILD" not in os.environ, reason="no expected build given")
def test_the_expected_build_runs() -> None:
    expected = {"compiled": COMPILED, "pure": PURE}[os.environ["UPSERTMAT_EXPECT_BUILD"]]
    assert build_name() == expected


def test_the_spec_is_never_compiled() -> None:
    names = [upsertmat.spec.__name__] + [
        info.name for info in pkgutil.walk_packages(upsertmat.spec.__path__, f"{upsertmat.spec.__name__}.")
    ]
    assert [name for name in names if is_compiled(name)] == []


def test_the_version_names_the_build(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "upsertmat", "--version"],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    )
    assert result.stdout.strip().endswith(f"({build_name()})")
