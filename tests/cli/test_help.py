"""`upsertmat COMMAND --help` explains every option and argument of every command."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from upsertmat.cli import build_parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (choices,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(choices.choices)


def test_every_command_is_listed_in_the_docs() -> None:
    """docs/cli.md's table of commands names exactly the commands the parser has."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `upsertmat ([a-z-]+)` \|", text, flags=re.MULTILINE))
    assert documented == set(subcommands())
    assert len(documented) >= 15


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_option_has_a_help_text(command: str) -> None:
    parser = subcommands()[command]
    missing = [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not action.help or action.help == argparse.SUPPRESS
    ]
    assert missing == [], f"upsertmat {command}: no help text for {missing}"
