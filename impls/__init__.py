"""upsertmat.impls — implementations of the materializer: strategies x state backends.

Pick one through the registry::

    from upsertmat.impls import create, Settings, Strategy, Backend
    from upsertmat.spec import Keys, insert
    materializer = create(Keys(pk=(0,)), Settings(strategy=Strategy.LEGACY, backend=Backend.HEAP))
    materializer.process(insert(1, 10, "a1"))   # -> +I[1, 10, 'a1']
"""

from .config import ConfigError, build_settings, parse_duration_ms
from .registry import (
    ALIASES,
    BackendEntry,
    StrategyEntry,
    UnknownImplementation,
    available,
    create,
    create_named,
    implementation_names,
    register,
    register_backend,
    register_strategy,
    resolve,
)
from .settings import Backend, LmdbDurability, Settings, Strategy, TimeDomain, TtlSettings, UpdateType

__all__ = [
    "ALIASES",
    "Backend",
    "BackendEntry",
    "ConfigError",
    "LmdbDurability",
    "Settings",
    "Strategy",
    "StrategyEntry",
    "TimeDomain",
    "TtlSettings",
    "UnknownImplementation",
    "UpdateType",
    "available",
    "build_settings",
    "create",
    "create_named",
    "implementation_names",
    "parse_duration_ms",
    "register",
    "register_backend",
    "register_strategy",
    "resolve",
]
