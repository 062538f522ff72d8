"""The ``bench`` command's option types: argparse ``type=`` callables and list handling.

Each type turns one option's text into a value or raises :class:`argparse.ArgumentTypeError`
with the message argparse prints; :func:`flatten` joins a repeated list option. The command
(:mod:`upsertmat.commands.bench`) only wires them to its options.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..impls import Backend, Strategy
from .pipeline import SERVER_SINKS, SINKS
from .runner import WORKLOADS

T = TypeVar("T")


def list_of(parse: Callable[[str], T], what: str) -> Callable[[str], list[T]]:
    """An argparse type: a comma-separated list of ``parse``'s values (empty parts ignored)."""

    def parse_list(text: str) -> list[T]:
        items: list[T] = []
        for part in text.split(","):
            if not part.strip():
                continue
            try:
                items.append(parse(part.strip()))
            except ValueError:
                raise argparse.ArgumentTypeError(f"bad {what} {part.strip()!r} in {text!r}") from None
        if not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {what}s")
        return items

    return parse_list


def strategy(text: str) -> Strategy:
    """A strategy name, any case (``map`` -> ``MAP``); ValueError otherwise."""
    return Strategy(text.upper())


def backend(text: str) -> Backend:
    """A backend name, any case (``RocksDB`` -> ``rocksdb``); ValueError otherwise."""
    return Backend(text.lower())


def workload(text: str) -> str:
    """One of :data:`~upsertmat.bench.runner.WORKLOADS`, any case; ValueError otherwise."""
    if text.lower() not in WORKLOADS:
        raise ValueError(text)
    return text.lower()


def on_off(text: str) -> bool:
    """``on``/``true``/``yes``/``1`` or ``off``/``false``/``no``/``0``; ValueError otherwise."""
    if text.lower() in ("on", "true", "yes", "1"):
        return True
    if text.lower() in ("off", "false", "no", "0"):
        return False
    raise ValueError(text)


def non_negative(text: str) -> int:
    """An integer >= 0 (a list item: ValueError otherwise)."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def percentage(text: str) -> int:
    """An integer within 0..100 (a list item: ValueError otherwise)."""
    value = int(text)
    if not 0 <= value <= 100:
        raise ValueError(text)
    return value


def non_negative_int(text: str) -> int:
    """An argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def seconds(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def sink_kinds(text: str) -> tuple[str, ...]:
    """An argparse type: sink kinds the benchmark can make (``sqlite,delta``), or a server's
    (``postgresql``: the scale sweep's, at ``--postgres-url``)."""
    known = SINKS + SERVER_SINKS
    kinds = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [kind for kind in kinds if kind not in known]
    if not kinds or unknown:
        raise argparse.ArgumentTypeError(f"expected sink kinds among {', '.join(known)}, got {text!r}")
    return kinds


def flatten(lists: Sequence[Sequence[T]] | None) -> list[T] | None:
    """Repeated list options concatenated, duplicates dropped (first wins); None if not given."""
    if lists is None:
        return None
    seen: list[T] = []
    for items in lists:
        seen.extend(item for item in items if item not in seen)
    return seen
