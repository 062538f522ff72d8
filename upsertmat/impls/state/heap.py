"""Heap (Python object) keyed state: dicts of Python objects, nothing serialized.

Values are kept **by reference**: ``get`` returns the very object that was ``put``. Strategies
must not rely on copies — never mutate a value after putting it (or after getting it) without
putting it again, and never expect a later ``get`` to return a fresh object. Byte backends
return decoded copies, so code that mutates values in place would behave differently there.

``commit`` and ``close`` do nothing: heap state is neither durable nor shared.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sortedcontainers import SortedDict  # type: ignore[import-untyped]

from .base import Value
from .named import NamedStates


class HeapValueState:
    """``ValueState`` in a dict: O(1) per call."""

    def __init__(self) -> None:
        self._values: dict[bytes, Value] = {}

    def get(self, context: bytes) -> Value | None:
        """O(1)."""
        return self._values.get(context)

    def get_many(self, contexts: Sequence[bytes]) -> list[Value | None]:
        """``[get(c) for c in contexts]``: O(1) each."""
        get = self._values.get
        return [get(context) for context in contexts]

    def put(self, context: bytes, value: Value) -> None:
        """O(1)."""
        self._values[context] = value

    def delete(self, context: bytes) -> None:
        """O(1)."""
        self._values.pop(context, None)

    def contexts(self) -> Iterator[bytes]:
        """Context keys in first-put order (a snapshot of the keys: O(n))."""
        return iter(list(self._values))


class HeapMapState:
    """``MapState`` as a dict of dicts (context -> user key -> value): O(1) per point call."""

    def __init__(self) -> None:
        self._maps: dict[bytes, dict[bytes, Value]] = {}

    def get(self, context: bytes, key: bytes) -> Value | None:
        """O(1)."""
        entries = self._maps.get(context)
        return None if entries is None else entries.get(key)

    def get_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Value | None]:
        """``[get(c, k) for c, k in pairs]``: O(1) each."""
        return [self.get(context, key) for context, key in pairs]

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        """O(1)."""
        entries = self._maps.get(context)
        if entries is None:
            self._maps[context] = {key: value}
        else:
            entries[key] = value

    def delete(self, context: bytes, key: bytes) -> None:
        """O(1); an emptied context is dropped."""
        entries = self._maps.get(context)
        if entries is not None and key in entries:
            del entries[key]
            if not entries:
                del self._maps[context]

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        """Entries in first-put order (a snapshot: O(entries of ``context``))."""
        return iter(list(self._maps.get(context, {}).items()))

    def clear(self, context: bytes) -> None:
        """O(1)."""
        self._maps.pop(context, None)

    def contexts(self) -> Iterator[bytes]:
        """Context keys with at least one entry (a snapshot: O(contexts))."""
        return iter(list(self._maps))


class HeapSortedMapState(HeapMapState):
    """``SortedMapState``: one sortedcontainers ``SortedDict`` per context key.

    Point calls are O(log n) for n entries of the context (SortedDict keeps a dict for lookups,
    so ``get`` is O(1)); ``last``/``first`` are O(1) amortised (``peekitem``), ``before`` is a
    bisect, O(log n). ``get``/``delete``/``items``/``clear``/``contexts`` are HeapMapState's (a
    SortedDict is a dict, and iterates in ascending user-key order).
    """

    _maps: dict[bytes, Any]  # context -> SortedDict

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        """O(log n)."""
        entries = self._maps.get(context)
        if entries is None:
            entries = self._maps[context] = SortedDict()
        entries[key] = value

    def last(self, context: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry: O(1) amortised."""
        entries = self._maps.get(context)
        if not entries:
            return None
        key, value = entries.peekitem(-1)
        return key, value

    def first(self, context: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry: O(1) amortised."""
        entries = self._maps.get(context)
        if not entries:
            return None
        key, value = entries.peekitem(0)
        return key, value

    def before(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry strictly below ``key``: O(log n)."""
        entries = self._maps.get(context)
        if not entries:
            return None
        index = entries.bisect_left(key)
        if index == 0:
            return None
        found, value = entries.peekitem(index - 1)
        return found, value

    def ceiling(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry at or above ``key``: O(log n)."""
        entries = self._maps.get(context)
        if not entries:
            return None
        index = entries.bisect_left(key)
        if index == len(entries):
            return None
        found, value = entries.peekitem(index)
        return found, value


class HeapBackend:
    """Named heap states of one operator instance. ``commit``/``close`` are no-ops."""

    name = "heap"
    supports_ordered = True

    def __init__(self) -> None:
        self._states = NamedStates(lambda kind, _name: kind())

    def value_state(self, name: str) -> HeapValueState:
        """The value state ``name`` (the same object on every call)."""
        return self._states.get(name, HeapValueState)

    def map_state(self, name: str) -> HeapMapState:
        """The map state ``name``."""
        return self._states.get(name, HeapMapState)

    def sorted_map_state(self, name: str) -> HeapSortedMapState:
        """The sorted map state ``name``."""
        return self._states.get(name, HeapSortedMapState)

    def commit(self) -> None:
        """Nothing to do: heap writes are applied at once."""

    def close(self) -> None:
        """Nothing to release."""
