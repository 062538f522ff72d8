"""`upsertmat COMMAND --help` explains every option and argument of every command."""

from __future__ import annotations

import argparse

import pytest

from upsertmat.cli import build_parser


def subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (choices,) = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    return dict(choices.choices)


def test_every_command_is_listed() -> None:
    assert set(subcommands()) == {
        "replay",
        "savepoint",
        "restore",
        "inspect",
        "bench",
        "run",
        "demo",
        "compile-plan",
        "explain-plan",
        "execute-plan",
        "conformance",
        "gateway",
        "client",
    }


@pytest.mark.parametrize("command", sorted(subcommands()))
def test_every_option_has_a_help_text(command: str) -> None:
    parser = subcommands()[command]
    missing = [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not action.help or action.help == argparse.SUPPRESS
    ]
    assert missing == [], f"upsertmat {command}: no help text for {missing}"
