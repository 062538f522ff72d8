"""In-memory checkpoints, migration and rescaling of live materializers.

A :class:`Checkpoint` is a consistent copy of one materializer's state taken between two
inputs: its elements (with stamps) and clock. Restoring it into a fresh implementation —
the same one, or any other registered one configured with the same keys, equalizer and TTL
(migration) — continues with identical output. Rescaling redistributes the union of ``p``
instances' checkpoints over ``q`` instances by key group.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...spec import Element, Keys, Materializer
from .keygroups import DEFAULT_MAX_PARALLELISM, check_parallelism, route
from .transfer import clock_of, export_state, import_state


@dataclass(frozen=True)
class Checkpoint:
    """A consistent copy of state: elements per context key in insertion order, and the clock."""

    entries: tuple[tuple[bytes, tuple[Element, ...]], ...]
    now: int

    @property
    def key_count(self) -> int:
        """Context keys held."""
        return len(self.entries)


def take_checkpoint(materializer: Materializer) -> Checkpoint:
    """Copy the state of ``materializer`` (call between inputs). O(state size)."""
    entries = tuple((context, tuple(elements)) for context, elements in export_state(materializer))
    return Checkpoint(entries, clock_of(materializer))


def restore_checkpoint(checkpoint: Checkpoint, into: Materializer) -> Materializer:
    """Import ``checkpoint`` into a fresh ``into`` and return it."""
    import_state(
        into, ((context, list(elements)) for context, elements in checkpoint.entries), checkpoint.now
    )
    return into


def migrate(source: Materializer, make: Callable[[Keys], Materializer], keys: Keys) -> Materializer:
    """A new implementation built by ``make`` holding ``source``'s state (``source`` stays open)."""
    return restore_checkpoint(take_checkpoint(source), make(keys))


def rescale(
    instances: Sequence[Materializer],
    make: Callable[[Keys], Materializer],
    keys: Keys,
    parallelism: int,
    max_parallelism: int = DEFAULT_MAX_PARALLELISM,
) -> list[Materializer]:
    """``parallelism`` new instances holding the union of ``instances``' state, split by key group.

    Instance ``i`` receives exactly the context keys whose key group lies in its range; the
    clock of each is the greatest clock of the old instances. A key held by two old instances
    is an error (ValueError).
    """
    check_parallelism(parallelism, max_parallelism)
    now = max((clock_of(instance) for instance in instances), default=0)
    parts: list[list[tuple[bytes, list[Element]]]] = [[] for _ in range(parallelism)]
    seen: set[bytes] = set()
    for instance in instances:
        for context, elements in export_state(instance):
            if context in seen:
                raise ValueError(f"context key {context!r} is held by two instances")
            seen.add(context)
            parts[route(context, parallelism, max_parallelism)].append((context, elements))
    result: list[Materializer] = []
    for part in parts:
        fresh = make(keys)
        import_state(fresh, part, now)
        result.append(fresh)
    return result
