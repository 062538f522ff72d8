"""The registry: one factory that builds an implementation from its names.

Names accepted by :func:`resolve`: ``STRATEGY/backend`` (``LEGACY/heap``, case-insensitive
strategy), the design discussion's aliases (``legacy-list``, ``linked-map``,
``rocksdb-sorted-iterator``, ``lmdb``), and, for third-party implementations,
``package.module:factory`` — a callable ``(Keys, Settings) -> Materializer``.
Built-in implementations are imported lazily, so a missing optional engine only fails the
implementations that need it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import replace

from ..spec import Keys, Materializer
from .settings import Backend, Settings, Strategy

Factory = Callable[[Keys, Settings], Materializer]


class UnknownImplementation(LookupError):
    """No implementation answers to the given name or (strategy, backend) pair."""


# (strategy, backend) -> "module:function", relative to this package.
_BUILTIN: dict[tuple[Strategy, Backend], str] = {
    (Strategy.LEGACY, Backend.HEAP): ".legacy:create_heap",
    (Strategy.LEGACY, Backend.ROCKSDB): ".legacy:create_rocksdb",
    (Strategy.LEGACY, Backend.LMDB): ".legacy:create_lmdb",
    (Strategy.VALUE, Backend.HEAP): ".strategies.value:create",
    (Strategy.MAP, Backend.HEAP): ".strategies.linked_map:create",
    (Strategy.SORTED, Backend.HEAP): ".strategies.sorted:create",
    (Strategy.ADAPTIVE, Backend.HEAP): ".strategies.adaptive:create",
    (Strategy.VALUE, Backend.ROCKSDB): ".strategies.value:create",
    (Strategy.MAP, Backend.ROCKSDB): ".strategies.linked_map:create",
    (Strategy.SORTED, Backend.ROCKSDB): ".strategies.sorted:create",
    (Strategy.ADAPTIVE, Backend.ROCKSDB): ".strategies.adaptive:create",
    (Strategy.VALUE, Backend.LMDB): ".strategies.value:create",
    (Strategy.MAP, Backend.LMDB): ".strategies.linked_map:create",
    (Strategy.SORTED, Backend.LMDB): ".strategies.sorted:create",
    (Strategy.ADAPTIVE, Backend.LMDB): ".strategies.adaptive:create",
}
_REGISTERED: dict[tuple[Strategy, Backend], Factory] = {}

# (strategy, backend) pairs that run only inside the PySpark pipeline (state in Spark's state
# store, one Python worker per partition): upsertmat.spark.processor builds them there. Not in
# available(): no in-process Materializer exists for them. SORTED is absent: Spark's map state
# cannot seek (docs/spark.md).
PIPELINE_ONLY: dict[tuple[Strategy, Backend], str] = {
    (Strategy.VALUE, Backend.SPARK): "upsertmat.spark.processor:build_materializer",
    (Strategy.MAP, Backend.SPARK): "upsertmat.spark.processor:build_materializer",
    (Strategy.ADAPTIVE, Backend.SPARK): "upsertmat.spark.processor:build_materializer",
    (Strategy.LEGACY, Backend.SPARK): "upsertmat.spark.processor:build_materializer",
}

ALIASES: dict[str, tuple[Strategy, Backend]] = {
    "legacy-list": (Strategy.LEGACY, Backend.HEAP),
    "linked-map": (Strategy.MAP, Backend.HEAP),
    "rocksdb-sorted-iterator": (Strategy.SORTED, Backend.ROCKSDB),
    "lmdb": (Strategy.SORTED, Backend.LMDB),  # measured best on LMDB: docs/strategies.md
}


def register(strategy: Strategy, backend: Backend, factory: Factory) -> None:
    """Add (or replace) the implementation of ``strategy`` on ``backend``."""
    _REGISTERED[(strategy, backend)] = factory


def available() -> list[tuple[Strategy, Backend]]:
    """Every (strategy, backend) pair the registry can build, in a stable order."""
    pairs = set(_BUILTIN) | set(_REGISTERED)
    return sorted(pairs, key=lambda pair: (list(Strategy).index(pair[0]), list(Backend).index(pair[1])))


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
    target = _BUILTIN.get((strategy, backend))
    if (strategy, backend) in PIPELINE_ONLY:
        raise UnknownImplementation(
            f"{strategy.value}/{backend.value} runs only inside the PySpark pipeline "
            "(upsertmat run, or upsertmat.spark.pipeline.run_pipeline); see docs/spark.md"
        )
    if target is None:
        choices = ", ".join(implementation_names())
        raise UnknownImplementation(
            f"no implementation of strategy {strategy.value} on backend {backend.value}; available: {choices}"
        )
    return load_factory(target, package=__package__)


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
