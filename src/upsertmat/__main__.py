"""``upsertmat`` (the console script) and ``python -m upsertmat``: the command line, with SIGINT and
SIGTERM handled from its first instant (importing the commands takes most of a second, and a
signal then must end the command as at any other moment: one line, 130 / 143;
:mod:`upsertmat.interrupt`)."""

from __future__ import annotations

import sys

from upsertmat.interrupt import StopSignals, interrupted


def main() -> int:
    """Import the command line and run it on ``sys.argv[1:]``; the exit code."""
    try:
        with StopSignals("upsertmat"):
            from upsertmat.cli import main as command_line

            return command_line()
    except KeyboardInterrupt as stop:
        return interrupted("upsertmat", stop)


if __name__ == "__main__":
    sys.exit(main())
