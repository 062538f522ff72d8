"""Heap (Python object) keyed state: plain dicts, nothing serialized."""

from __future__ import annotations

from collections.abc import Iterator

from .base import Value


class HeapValueState:
    """``ValueState`` in a dict. Values are stored by reference (no copy): O(1) per call."""

    def __init__(self) -> None:
        self._values: dict[bytes, Value] = {}

    def get(self, context: bytes) -> Value | None:
        """O(1)."""
        return self._values.get(context)

    def put(self, context: bytes, value: Value) -> None:
        """O(1)."""
        self._values[context] = value

    def delete(self, context: bytes) -> None:
        """O(1)."""
        self._values.pop(context, None)

    def contexts(self) -> Iterator[bytes]:
        """Context keys in first-put order."""
        return iter(list(self._values))
