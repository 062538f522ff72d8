"""Which class runs a strategy: its general layout, or the layout's heap specialisation.

Every built-in strategy's rules live in one module (:mod:`.legacy`, :mod:`.value`,
:mod:`.linked_map`, :mod:`.sorted`, :mod:`.adaptive`), written once against the state
protocols; that module is the statement of the rules and runs on every backend. Beside it, in
``<module>_heap.py``, a *heap specialisation* writes the same layout straight into
:class:`~upsertmat.impls.state.heap.HeapBackend`'s dicts (no state call per access, match
keys as tokens, records changed in place). It is a subclass of the general class, so
everything it does not override (export, import, TTL hooks) is the general code; it must
give exactly the general layout's outputs, misses, exported elements and ``_check()``
(docs/architecture.md, *Adding a strategy*: the obligations; tests/strategies/test_heap_twins.py
runs each specialisation in lockstep with its general layout on the same heap backend kind).

:data:`HEAP_VARIANTS` is the one table that pairs them; :func:`build` is what the registry calls.
The specialisation runs where :func:`~.common.in_place_on_heap` holds (a heap backend, TTL off,
async state off) and only for the general class itself (a subclass of it, a third party's
included, is built as it is). Why the specialisations exist at all (measured, compiled build):
docs/strategies.md, *Heap specialisations*.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from ...spec import Keys
from ..settings import Settings
from ..state import StateBackend
from ..state.heap import HeapBackend
from .adaptive import AdaptiveMaterializer
from .adaptive_heap import HeapAdaptiveMaterializer
from .common import StrategyBase, in_place_on_heap
from .legacy import LegacyMaterializer
from .legacy_heap import HeapLegacyMaterializer
from .linked_map import MapMaterializer
from .linked_map_heap import HeapMapMaterializer
from .sorted import SortedMaterializer
from .sorted_heap import HeapSortedMaterializer
from .value import ValueMaterializer
from .value_heap import HeapValueMaterializer

__all__ = ["HEAP_VARIANTS", "HeapVariant", "build"]

HeapVariant = Callable[[Keys, HeapBackend, Settings], StrategyBase]
"""A heap specialisation's constructor: ``(keys, heap backend, settings) -> materializer``."""

HEAP_VARIANTS: Final[Mapping[type[StrategyBase], HeapVariant]] = {
    LegacyMaterializer: HeapLegacyMaterializer,
    ValueMaterializer: HeapValueMaterializer,
    MapMaterializer: HeapMapMaterializer,
    SortedMaterializer: HeapSortedMaterializer,
    AdaptiveMaterializer: HeapAdaptiveMaterializer,
}
"""General layout class -> its heap specialisation (module docstring)."""


def build(cls: type[StrategyBase], keys: Keys, backend: StateBackend, settings: Settings) -> StrategyBase:
    """The materializer of strategy class ``cls`` on an opened ``backend``: its heap
    specialisation where :func:`~.common.in_place_on_heap` holds and ``cls`` has one (exactly
    ``cls``, not a base class's), else ``cls(keys, backend, settings)``."""
    variant = HEAP_VARIANTS.get(cls)
    if variant is not None and in_place_on_heap(backend, settings):
        return variant(keys, backend, settings)
    return cls(keys, backend, settings)
