"""How ``upsertmat replay`` talks to people: one line per message on stderr, ``upsertmat replay: ...``."""

from __future__ import annotations

import sys

PREFIX = "upsertmat replay"
SHOWN_MESSAGES = 10
"""Per kind (bad lines, retraction misses) and run: messages shown; the rest are only counted."""


def say(message: str) -> None:
    """Write ``upsertmat replay: MESSAGE`` on stderr (flushed: a message is never held back)."""
    print(f"{PREFIX}: {message}", file=sys.stderr, flush=True)
