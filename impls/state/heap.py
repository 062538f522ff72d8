"""Heap (Python object) keyed state: plain dicts, nothing serialized."""

from __future__ import annotations

from typing import Generic, TypeVar

V = TypeVar("V")


class HeapValueState(Generic[V]):
    """``ValueState`` in a dict. Values are stored by reference: callers must not mutate a
    value after ``put`` unless they mean to (strategies treat ``get`` results as owned)."""

    def __init__(self) -> None:
        self._values: dict[bytes, V] = {}

    def get(self, context: bytes) -> V | None:
        """O(1)."""
        return self._values.get(context)

    def put(self, context: bytes, value: V) -> None:
        """O(1)."""
        self._values[context] = value

    def delete(self, context: bytes) -> None:
        """O(1)."""
        self._values.pop(context, None)

    def __len__(self) -> int:
        return len(self._values)
