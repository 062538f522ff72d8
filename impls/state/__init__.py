"""Keyed state that strategies are written against, per backend."""

from .base import ValueState
from .heap import HeapValueState

__all__ = ["HeapValueState", "ValueState"]
