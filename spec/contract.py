"""The contract every materializer implementation fulfils (the model included)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Protocol, runtime_checkable

from .changes import Change, Row
from .misses import MissExplanation


class Unsupported(Exception):
    """An implementation does not offer what it was asked for (TTL, a time domain, state
    transfer, ...); the message says what, in one line.

    Raised by a factory ``(Keys, Settings) -> Materializer`` for settings it cannot honour
    (e.g. ``settings.ttl.enabled`` without TTL support), or by a method of the optional
    protocols below (e.g. ``export_elements``). The conformance suite then skips the tests
    that need it, with the message as the reason, as it does for a program that exits with
    code 2 (docs/conformance.md). It is not a failure: nothing of the rules was violated.
    """


@runtime_checkable
class Materializer(Protocol):
    """A sink upsert materializer over many context keys.

    ``process`` feeds one input change (its ``ts`` is the event timestamp, if any) and returns
    the single emitted change or None (rule 11). ``advance_time`` moves the clock: processing
    time, or the watermark in event-time mode. ``retract_misses`` counts rule-7 retractions.
    ``close`` releases resources (files, locks); the object is unusable afterwards.
    """

    @property
    def retract_misses(self) -> int: ...

    def process(self, change: Change) -> Change | None: ...

    def advance_time(self, now: int) -> None: ...

    def close(self) -> None: ...


@runtime_checkable
class BatchProcessing(Protocol):
    """Optional: feed many changes in one call (every built-in implementation has it).

    ``process_many(changes, out)`` is ``[process(change) for change in changes]``: the same
    outputs, in input order, each input applied (and committed, on durable backends) as
    ``process`` applies it. Outputs are appended to ``out`` (a new list if None) as each input
    completes and ``out`` is returned; when an input raises, ``out`` holds the outputs of the
    inputs before it and the exception propagates. Use :func:`process_many` to feed any
    materializer, with or without the method.
    """

    def process_many(
        self, changes: Iterable[Change], out: list[Change | None] | None = None
    ) -> list[Change | None]: ...


def process_many(
    materializer: Materializer, changes: Iterable[Change], out: list[Change | None] | None = None
) -> list[Change | None]:
    """``materializer.process_many`` if it has one, else ``process`` in a loop (same contract)."""
    if isinstance(materializer, BatchProcessing):
        return materializer.process_many(changes, out)
    out = [] if out is None else out
    for change in changes:
        out.append(materializer.process(change))
    return out


@runtime_checkable
class HistoryAccess(Protocol):
    """Optional: export and import the whole state as per-key histories.

    The canonical (backend-independent) view of the state: for every non-empty context key,
    its stored rows in insertion order. What ``replay --state-dir`` persists for heap
    implementations, and the seed of the savepoint format.
    """

    def histories(self) -> Iterator[tuple[bytes, list[Row]]]:
        """Every non-empty context key with its rows in insertion order."""
        ...

    def load_histories(self, histories: Iterable[tuple[bytes, list[Row]]]) -> None:
        """Set the rows of each given context key (an empty list removes the key)."""
        ...


Element = tuple[Row, int]
"""A stored row with its TTL stamp (ms): the write time in processing time, the record's
``ts`` in event time. Under per-key TTL every element of a key carries the key's stamp."""


@runtime_checkable
class StateTransfer(Protocol):
    """Optional: export and import the whole state with stamps and the clock.

    The lossless, backend-independent view behind checkpoints, savepoints, migration and
    rescaling: for every non-empty context key its elements in insertion order, plus the
    clock (``now``: the latest processing time or watermark seen). ``import_elements`` into
    an implementation configured like the exporter (keys, equalizer, TTL) continues with
    identical output; a per-key-TTL importer takes each key's greatest element stamp as
    the key's stamp.
    """

    @property
    def now(self) -> int:
        """The clock: the greatest time passed to ``advance_time`` (0 before any)."""
        ...

    def export_elements(self) -> Iterator[tuple[bytes, list[Element]]]:
        """Every non-empty context key with its elements in insertion order."""
        ...

    def import_elements(self, items: Iterable[tuple[bytes, list[Element]]], now: int) -> None:
        """Set the elements of each given key (empty removes it) and the clock to ``now``."""
        ...


@runtime_checkable
class MissExplaining(Protocol):
    """Optional: why retractions matched nothing (docs/spec.md, rule 7).

    ``take_misses()`` returns the explanations (:class:`~upsertmat.spec.misses.MissExplanation`)
    of the misses since the previous call, oldest first, and forgets them: after one
    ``process``, an empty list or that input's explanation. Every built-in strategy offers it
    (``upsertmat.misses.max-rows``; 0 turns it off and it returns ``[]``).
    """

    def take_misses(self) -> list[MissExplanation]: ...
