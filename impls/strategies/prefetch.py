"""Async state: a batch's first state reads issued together, then served from memory.

With ``table.exec.async-state.enabled`` a strategy wraps the states its inputs read first
(the per-key value or meta, and the match-key index) in these classes. Before a batch is
processed, :meth:`prefetch` asks the backend for every key the batch will read in one call
(``get_many``: a RocksDB ``multi_get``, LMDB lookups in key order in one transaction; any
state without ``get_many`` is read key by key). The batch is then processed exactly as
the synchronous mode does it, input by input, in arrival order; a read of a fetched key is
answered from memory, and every write goes to the backend *and* updates the fetched copy,
so a later input of the same key sees its predecessor's write. :meth:`release` drops the
fetched copies (after the batch, and when an input fails: the backend may have rolled its
writes back). Nothing is stored differently: the state format is the synchronous one.

Values are shared by reference between the fetched copy and the strategy, as on the heap
backend (strategies never mutate a value without putting it again).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..state import MapState, ValueState

Value = Any
_ABSENT: Any = object()


class PrefetchedValueState:
    """A ``ValueState`` whose reads of prefetched context keys come from memory."""

    def __init__(self, inner: ValueState) -> None:
        self.inner = inner
        self._fetched: dict[bytes, Value | None] = {}

    def prefetch(self, contexts: Iterable[bytes]) -> None:
        """Read every not yet fetched context in one backend call."""
        fetched = self._fetched
        wanted = [context for context in dict.fromkeys(contexts) if context not in fetched]
        if not wanted:
            return
        get_many = getattr(self.inner, "get_many", None)
        values: Sequence[Value | None]
        values = get_many(wanted) if get_many else [self.inner.get(context) for context in wanted]
        fetched.update(zip(wanted, values, strict=True))

    def release(self) -> None:
        """Forget every fetched value."""
        self._fetched = {}

    def get(self, context: bytes) -> Value | None:
        """The fetched value, else the backend's. One read (or none)."""
        value = self._fetched.get(context, _ABSENT)
        return self.inner.get(context) if value is _ABSENT else value

    def put(self, context: bytes, value: Value) -> None:
        """Write through; a fetched copy follows."""
        self.inner.put(context, value)
        if context in self._fetched:
            self._fetched[context] = value

    def delete(self, context: bytes) -> None:
        """Write through; a fetched copy follows."""
        self.inner.delete(context)
        if context in self._fetched:
            self._fetched[context] = None

    def contexts(self) -> Iterator[bytes]:
        """The backend's (a scan)."""
        return self.inner.contexts()


class PrefetchedMapState:
    """A ``MapState`` whose point reads of prefetched (context, user key) pairs come from
    memory; scans and clears go to the backend (and a clear forgets the context's copies)."""

    def __init__(self, inner: MapState) -> None:
        self.inner = inner
        self._fetched: dict[tuple[bytes, bytes], Value | None] = {}

    def prefetch(self, pairs: Iterable[tuple[bytes, bytes]]) -> None:
        """Read every not yet fetched (context, user key) in one backend call."""
        fetched = self._fetched
        wanted = [pair for pair in dict.fromkeys(pairs) if pair not in fetched]
        if not wanted:
            return
        get_many = getattr(self.inner, "get_many", None)
        values: Sequence[Value | None]
        values = get_many(wanted) if get_many else [self.inner.get(c, k) for c, k in wanted]
        fetched.update(zip(wanted, values, strict=True))

    def release(self) -> None:
        """Forget every fetched value."""
        self._fetched = {}

    def get(self, context: bytes, key: bytes) -> Value | None:
        """The fetched value, else the backend's."""
        value = self._fetched.get((context, key), _ABSENT)
        return self.inner.get(context, key) if value is _ABSENT else value

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        """Write through; a fetched copy follows."""
        self.inner.put(context, key, value)
        if (context, key) in self._fetched:
            self._fetched[(context, key)] = value

    def delete(self, context: bytes, key: bytes) -> None:
        """Write through; a fetched copy follows."""
        self.inner.delete(context, key)
        if (context, key) in self._fetched:
            self._fetched[(context, key)] = None

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        """The backend's (a scan)."""
        return self.inner.items(context)

    def clear(self, context: bytes) -> None:
        """Clear in the backend; fetched copies of ``context`` become absent."""
        self.inner.clear(context)
        for pair in [pair for pair in self._fetched if pair[0] == context]:
            self._fetched[pair] = None

    def contexts(self) -> Iterator[bytes]:
        """The backend's (a scan)."""
        return self.inner.contexts()
