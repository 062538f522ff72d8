"""The fast strategies (docs/strategies.md), each written once against the state protocols.

``VALUE`` (:mod:`.value`), ``MAP`` (:mod:`.linked_map`), ``SORTED`` (:mod:`.sorted`) and
``ADAPTIVE`` (:mod:`.adaptive`) run on every backend :func:`upsertmat.impls.state.open_backend`
opens (SORTED only where ``supports_ordered``). Each module's ``create(keys, settings)`` is the
registry factory; the classes take an already opened backend (for tests: a
``CountingBackend``). docs/strategies.md describes the layouts and their costs.
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
