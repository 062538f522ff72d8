"""The registry: implementations built from parts, strategies x backends.

A *strategy* is one class (a :class:`~.strategies.common.StrategyBase` subclass, built as
``cls(keys, state_backend, settings)``) plus one :func:`register_strategy`; a *backend* is
one opener (``settings -> StateBackend``) plus one :func:`register_backend` saying whether it
offers ordered iteration and whether it runs in this process. The implementations are every
(strategy, backend) pair where the backend offers what the strategy needs (SORTED needs
ordered iteration); a backend that runs only inside the PySpark pipeline (``spark``) yields
the :data:`PIPELINE_ONLY` pairs instead, which ``upsertmat.spark.processor`` builds there.

Names accepted by :func:`resolve`: ``STRATEGY/backend`` (``LEGACY/heap``, case-insensitive
strategy), the design discussion's aliases (``legacy-list``, ``linked-map``,
``rocksdb-sorted-iterator``, ``lmdb``), and, for third-party implementations,
``package.module:factory`` — a callable ``(Keys, Settings) -> Materializer``; :func:`register`
puts such a factory under a pair. Strategy classes are imported lazily, so a missing optional
engine only fails the implementations that need it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..spec import Keys, Materializer
from .settings import Backend, Settings, Strategy
from .state import StateBackend, open_backend

Factory = Callable[[Keys, Settings], Materializer]
Opener = Callable[[Settings], StateBackend]


class UnknownImplementation(LookupError):
    """No implementation answers to the given name or (strategy, backend) pair."""


@dataclass(frozen=True)
class StrategyEntry:
    """A strategy: ``target`` names its class (``module:Class``, relative to this package or
    absolute); ``needs_ordered``: it runs only on backends with ordered iteration."""

    strategy: Strategy
    target: str
    needs_ordered: bool = False


@dataclass(frozen=True)
class BackendEntry:
    """A backend: ``open`` builds its state for settings; ``ordered``: it offers ordered
    iteration (``sorted_map_state``); ``in_process``: False for a backend that exists only inside
    the PySpark pipeline."""

    backend: Backend
    ordered: bool
    in_process: bool = True
    open: Opener = open_backend


STRATEGIES: dict[Strategy, StrategyEntry] = {}
BACKENDS: dict[Backend, BackendEntry] = {}
_REGISTERED: dict[tuple[Strategy, Backend], Factory] = {}
SPARK_FACTORY = "upsertmat.spark.processor:build_materializer"


def register_strategy(entry: StrategyEntry) -> None:
    """Add (or replace) a strategy; it runs on every registered backend that suits it."""
    STRATEGIES[entry.strategy] = entry


def register_backend(entry: BackendEntry) -> None:
    """Add (or replace) a backend; every registered strategy it suits runs on it."""
    BACKENDS[entry.backend] = entry


register_strategy(StrategyEntry(Strategy.LEGACY, ".strategies.legacy:LegacyMaterializer"))
register_strategy(StrategyEntry(Strategy.VALUE, ".strategies.value:ValueMaterializer"))
register_strategy(StrategyEntry(Strategy.MAP, ".strategies.linked_map:MapMaterializer"))
register_strategy(StrategyEntry(Strategy.SORTED, ".strategies.sorted:SortedMaterializer", needs_ordered=True))
register_strategy(StrategyEntry(Strategy.ADAPTIVE, ".strategies.adaptive:AdaptiveMaterializer"))
register_backend(BackendEntry(Backend.HEAP, ordered=True))
register_backend(BackendEntry(Backend.ROCKSDB, ordered=True))
register_backend(BackendEntry(Backend.LMDB, ordered=True))
# Spark's map state cannot seek (docs/spark.md): no SORTED there.
register_backend(BackendEntry(Backend.SPARK, ordered=False, in_process=False))


def _suits(strategy: StrategyEntry, backend: BackendEntry) -> bool:
    return backend.ordered or not strategy.needs_ordered


def _order(pair: tuple[Strategy, Backend]) -> tuple[int, int]:
    return list(Strategy).index(pair[0]), list(Backend).index(pair[1])


def _built_pairs(in_process: bool) -> list[tuple[Strategy, Backend]]:
    pairs = [
        (strategy.strategy, backend.backend)
        for strategy in STRATEGIES.values()
        for backend in BACKENDS.values()
        if backend.in_process is in_process and _suits(strategy, backend)
    ]
    return sorted(pairs, key=_order)


def pipeline_only() -> dict[tuple[Strategy, Backend], str]:
    """The (strategy, backend) pairs that run only inside the PySpark pipeline, each with the
    factory that builds them there."""
    return dict.fromkeys(_built_pairs(in_process=False), SPARK_FACTORY)


PIPELINE_ONLY: dict[tuple[Strategy, Backend], str] = pipeline_only()
"""The built-in pipeline-only pairs (a snapshot of :func:`pipeline_only` at import)."""

ALIASES: dict[str, tuple[Strategy, Backend]] = {
    "legacy-list": (Strategy.LEGACY, Backend.HEAP),
    "linked-map": (Strategy.MAP, Backend.HEAP),
    "rocksdb-sorted-iterator": (Strategy.SORTED, Backend.ROCKSDB),
    "lmdb": (Strategy.SORTED, Backend.LMDB),  # measured best on LMDB: docs/strategies.md
}


def strategy_class(strategy: Strategy) -> Any:
    """The registered class of ``strategy`` (imported on first use). UnknownImplementation if none."""
    entry = STRATEGIES.get(strategy)
    if entry is None:
        raise UnknownImplementation(f"no strategy {strategy.value} is registered")
    return load_factory(entry.target, package=__package__)


def _built(strategy: StrategyEntry, backend: BackendEntry) -> Factory:
    """The factory of a built pair: validate settings, open the backend, build the class."""

    def create(keys: Keys, settings: Settings) -> Materializer:
        cls = strategy_class(strategy.strategy)
        settings = replace(settings, strategy=strategy.strategy, backend=backend.backend)
        cls.check_settings(settings)  # refuse bad settings before opening any files
        from .strategies.variants import build  # the heap specialisation where it applies

        materializer: Materializer = build(cls, keys, backend.open(settings), settings)
        return materializer

    return create


def register(strategy: Strategy, backend: Backend, factory: Factory) -> None:
    """Add (or replace) the implementation of ``strategy`` on ``backend``."""
    _REGISTERED[(strategy, backend)] = factory


def available() -> list[tuple[Strategy, Backend]]:
    """Every (strategy, backend) pair the registry can build here, in a stable order."""
    return sorted(set(_built_pairs(in_process=True)) | set(_REGISTERED), key=_order)


def implementation_names() -> list[str]:
    """``STRATEGY/backend`` names of :func:`available`."""
    return [f"{strategy.value}/{backend.value}" for strategy, backend in available()]


def resolve(name: str) -> tuple[Strategy, Backend]:
    """(strategy, backend) for ``STRATEGY/backend`` or an alias. UnknownImplementation otherwise."""
    if name in ALIASES:
        return ALIASES[name]
    strategy_name, sep, backend_name = name.partition("/")
    try:
        if not sep:
            raise ValueError
        return Strategy(strategy_name.upper()), Backend(backend_name.lower())
    except ValueError:
        choices = ", ".join([*implementation_names(), *ALIASES])
        raise UnknownImplementation(f"unknown implementation {name!r}; known: {choices}") from None


def factory_for(strategy: Strategy, backend: Backend) -> Factory:
    """The factory of a pair. UnknownImplementation if there is none."""
    if (strategy, backend) in _REGISTERED:
        return _REGISTERED[(strategy, backend)]
    strategy_entry, backend_entry = STRATEGIES.get(strategy), BACKENDS.get(backend)
    if strategy_entry is not None and backend_entry is not None and _suits(strategy_entry, backend_entry):
        if not backend_entry.in_process:
            raise UnknownImplementation(
                f"{strategy.value}/{backend.value} runs only inside the PySpark pipeline "
                "(upsertmat run, or upsertmat.spark.pipeline.run_pipeline); see docs/spark.md"
            )
        return _built(strategy_entry, backend_entry)
    choices = ", ".join(implementation_names())
    raise UnknownImplementation(
        f"no implementation of strategy {strategy.value} on backend {backend.value}; available: {choices}"
    )


def load_factory(target: str, package: str | None = None) -> Factory:
    """Import ``module:attribute`` and return the attribute (a factory)."""
    module_name, sep, attribute = target.partition(":")
    if not sep:
        raise UnknownImplementation(f"expected 'module:factory', got {target!r}")
    module = importlib.import_module(module_name, package)
    factory: Factory = getattr(module, attribute)
    return factory


def create(keys: Keys, settings: Settings | None = None) -> Materializer:
    """Build the implementation ``settings`` selects (strategy and backend) for ``keys``."""
    settings = settings or Settings()
    if settings.conflict.compacting:  # ON CONFLICT DO ERROR | NOTHING: one implementation per backend
        return load_factory(".conflict:create", package=__package__)(keys, settings)
    return factory_for(settings.strategy, settings.backend)(keys, settings)


def create_named(name: str, keys: Keys, settings: Settings | None = None) -> Materializer:
    """Build an implementation by name: ``STRATEGY/backend``, an alias, or ``module:factory``."""
    settings = settings or Settings()
    if ":" in name:
        return load_factory(name)(keys, settings)
    strategy, backend = resolve(name)
    return create(keys, replace(settings, strategy=strategy, backend=backend))
