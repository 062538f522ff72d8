"""The strategies (docs/strategies.md): each one's rules written once, in its own module.

``LEGACY`` (:mod:`.legacy`), ``VALUE`` (:mod:`.value`), ``MAP`` (:mod:`.linked_map`),
``SORTED`` (:mod:`.sorted`) and ``ADAPTIVE`` (:mod:`.adaptive`) are each one class written
against the state protocols, running on every backend :func:`upsertmat.impls.state.open_backend`
opens (SORTED only where ``supports_ordered``); the registry registers the classes. Beside each,
``<module>_heap.py`` is its heap specialisation (the same layout written straight into the heap
backend's dicts), paired with it in :data:`.variants.HEAP_VARIANTS` and built by
:func:`.variants.build` on heap with TTL and async state off. The per-input shell is
:class:`.common.StrategyBase`'s. The classes take an already opened backend (for tests: a
``CountingBackend``). docs/architecture.md, *Adding things*, says how to add one.
"""

from .adaptive import AdaptiveMaterializer, thresholds
from .common import StrategyBase, decode_seq, encode_seq
from .linked_map import LinkedList, MapMaterializer
from .sorted import SortedMaterializer
from .value import ValueMaterializer

__all__ = [
    "AdaptiveMaterializer",
    "LinkedList",
    "MapMaterializer",
    "SortedMaterializer",
    "StrategyBase",
    "ValueMaterializer",
    "decode_seq",
    "encode_seq",
    "thresholds",
]
