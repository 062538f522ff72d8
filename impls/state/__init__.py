"""Keyed state that strategies are written against, per backend."""

from .base import MapState, SortedMapState, StateBackend, Value, ValueState
from .heap import HeapValueState

__all__ = ["HeapValueState", "MapState", "SortedMapState", "StateBackend", "Value", "ValueState"]
