"""A backend wrapper that counts state accesses, for complexity tests.

``get``/``last``/``first``/``before``/``items``/``contexts`` count as reads (``items`` and
``contexts`` also add every entry they yield to ``scanned``); ``put``/``delete``/``clear``
count as writes; ``commit`` counts in ``commits``. The counters are shared by every state the
wrapper hands out, so a test can read them before and after one event.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from .base import MapState, SortedMapState, StateBackend, Value, ValueState


@dataclass
class Counters:
    """Access counts since creation (or the last :meth:`reset`)."""

    reads: int = 0
    writes: int = 0
    scanned: int = 0
    commits: int = 0

    def reset(self) -> None:
        """Zero every counter."""
        self.reads = self.writes = self.scanned = self.commits = 0

    @property
    def accesses(self) -> int:
        """Reads plus writes plus scanned entries."""
        return self.reads + self.writes + self.scanned


def _counted(counters: Counters, items: Iterator[tuple[bytes, Value]]) -> Iterator[tuple[bytes, Value]]:
    for item in items:
        counters.scanned += 1
        yield item


class CountingValueState:
    """A ``ValueState`` that counts calls into :class:`Counters`."""

    def __init__(self, inner: ValueState, counters: Counters) -> None:
        self._inner = inner
        self._counters = counters

    def get(self, context: bytes) -> Value | None:
        self._counters.reads += 1
        return self._inner.get(context)

    def put(self, context: bytes, value: Value) -> None:
        self._counters.writes += 1
        self._inner.put(context, value)

    def delete(self, context: bytes) -> None:
        self._counters.writes += 1
        self._inner.delete(context)

    def contexts(self) -> Iterator[bytes]:
        self._counters.reads += 1
        for context in self._inner.contexts():
            self._counters.scanned += 1
            yield context


class CountingMapState:
    """A ``MapState`` (or ``SortedMapState``) that counts calls into :class:`Counters`."""

    def __init__(self, inner: MapState, counters: Counters) -> None:
        self._inner = inner
        self._counters = counters

    def get(self, context: bytes, key: bytes) -> Value | None:
        self._counters.reads += 1
        return self._inner.get(context, key)

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        self._counters.writes += 1
        self._inner.put(context, key, value)

    def delete(self, context: bytes, key: bytes) -> None:
        self._counters.writes += 1
        self._inner.delete(context, key)

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        self._counters.reads += 1
        return _counted(self._counters, self._inner.items(context))

    def clear(self, context: bytes) -> None:
        self._counters.writes += 1
        self._inner.clear(context)

    def contexts(self) -> Iterator[bytes]:
        self._counters.reads += 1
        for context in self._inner.contexts():
            self._counters.scanned += 1
            yield context


class CountingSortedMapState(CountingMapState):
    """A ``SortedMapState`` that counts calls into :class:`Counters`."""

    def __init__(self, inner: SortedMapState, counters: Counters) -> None:
        super().__init__(inner, counters)
        self._sorted = inner

    def last(self, context: bytes) -> tuple[bytes, Value] | None:
        self._counters.reads += 1
        return self._sorted.last(context)

    def first(self, context: bytes) -> tuple[bytes, Value] | None:
        self._counters.reads += 1
        return self._sorted.first(context)

    def before(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        self._counters.reads += 1
        return self._sorted.before(context, key)

    def ceiling(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        self._counters.reads += 1
        return self._sorted.ceiling(context, key)


class CountingBackend:
    """Wraps ``inner``; every state it hands out counts into :attr:`counters`."""

    def __init__(self, inner: StateBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.supports_ordered = inner.supports_ordered
        self.counters = Counters()

    def value_state(self, name: str) -> CountingValueState:
        return CountingValueState(self.inner.value_state(name), self.counters)

    def map_state(self, name: str) -> CountingMapState:
        return CountingMapState(self.inner.map_state(name), self.counters)

    def sorted_map_state(self, name: str) -> CountingSortedMapState:
        return CountingSortedMapState(self.inner.sorted_map_state(name), self.counters)

    def commit(self) -> None:
        self.counters.commits += 1
        self.inner.commit()

    def checkpoint(self) -> None:
        self.inner.checkpoint()

    def rollback(self) -> None:
        self.inner.rollback()

    def close(self) -> None:
        self.inner.close()
