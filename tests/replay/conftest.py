"""The ``cli`` fixture of the replay tests: ``main`` run in-process."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from upsertmat.cli import main

from .support import Cli, Result


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Run ``main`` in-process; ``stdin=`` feeds standard input."""

    def run(*argv: str | Path, stdin: str | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
        code = main([str(arg) for arg in argv])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
