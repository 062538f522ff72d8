"""Check a whole JSON Lines changelog (a file or stdin): the one pass behind ``check-keys``.

Reads the lines of ``upsertmat replay``'s input format (clock lines skipped), checks each
change's shape against the keys and feeds it to a :class:`~.checker.KeyChecker`. A line that
is not a change stops the check (:class:`~upsertmat.errors.CliError`, exit 1, naming its
number), and so does a device that fails while the input is read (exit 4); an input that
cannot be opened is a usage error (exit 2), as for ``replay``. O(input) time, memory as
:class:`~.checker.KeyChecker`'s.
"""

from __future__ import annotations

import contextlib

from upsertmat.errors import CliError, ExitCode
from upsertmat.replay.jsonl import BadLine, ChangeLine, RowShape, parse_line
from upsertmat.replay.source import open_input, read_failure
from upsertmat.spec import Keys

from .checker import KeyChecker, Report


def check_changelog(name: str, keys: Keys) -> Report:
    """The report of the changelog ``name`` (a path, or ``-`` for stdin) against ``keys``."""
    shape = RowShape(keys)
    checker = KeyChecker(keys)
    number = 0
    with contextlib.ExitStack() as stack:
        source = open_input(name)
        if name != "-":
            stack.enter_context(source)
        try:
            for number, raw in enumerate(source, 1):
                try:
                    item = parse_line(raw)
                    if isinstance(item, ChangeLine):
                        shape.check(item.change.row)
                        checker.feed(number, item.change)
                except BadLine as error:
                    raise CliError(f"line {number}: {error}", ExitCode.BAD_INPUT) from None
        except OSError as error:
            raise CliError(f"{read_failure(error, name).message} (line {number + 1})", ExitCode.IO) from None
    return checker.finish(number)
