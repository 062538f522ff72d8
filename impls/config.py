"""Configuration keys (Flink's names where one exists), parsing and layering.

Layers, lowest first: built-in defaults < ``--config FILE`` (a YAML mapping, flat
``key: value`` or nested, as Flink's ``config.yaml``) < ``--set KEY=VALUE`` and the CLI
shortcuts. An unknown key or a malformed value raises :class:`ConfigError` naming the key,
the value and where it came from.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from .settings import (
    MAX_TIME_MS,
    Backend,
    ConflictBehavior,
    LmdbDurability,
    Settings,
    Strategy,
    TimeDomain,
    UpdateType,
)

STRATEGY = "table.exec.sink.upsert-materialize-strategy.type"
THRESHOLD_HIGH = "table.exec.sink.upsert-materialize-strategy.adaptive.threshold.high"
THRESHOLD_LOW = "table.exec.sink.upsert-materialize-strategy.adaptive.threshold.low"
BACKEND = "state.backend.type"
TTL = "table.exec.state.ttl"
TIME_DOMAIN = "upsertmat.state.ttl.time-domain"
UPDATE_TYPE = "upsertmat.state.ttl.update-type"
EXPIRY_BUDGET = "upsertmat.state.ttl.expiry-budget"
LMDB_DURABILITY = "upsertmat.state.lmdb.durability"
CHECKPOINT_INTERVAL = "execution.checkpointing.interval"
ASYNC_STATE = "table.exec.async-state.enabled"
CONFLICT_STRATEGY = "table.exec.sink.conflict-strategy"
MISS_ROWS = "upsertmat.misses.max-rows"


class ConfigError(ValueError):
    """A configuration key or value that cannot be used; the message says which and where."""


class UnsupportedSetting(ConfigError):
    """A well-formed setting the chosen implementation does not implement (yet)."""


_UNITS_MS = {
    "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "min": 60_000, "m": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}  # fmt: skip
_DURATION = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")


def parse_duration_ms(text: str | int) -> int:
    """Milliseconds of a Flink-style duration: ``1000``, ``"1000 ms"``, ``"10 s"``, ``"1 h"``.

    A bare number is milliseconds. Raises ValueError for anything else (negative, fractions,
    unknown units).
    """
    if isinstance(text, bool):
        raise ValueError(f"not a duration: {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"a duration cannot be negative: {text}")
        return _bounded_duration(text)
    match = _DURATION.match(str(text).lower())
    if not match or match.group(2) not in {"", *_UNITS_MS}:
        raise ValueError(f"not a duration: {text!r} (examples: 1000, '1000 ms', '10 s', '1 h')")
    return _bounded_duration(int(match.group(1)) * _UNITS_MS.get(match.group(2) or "ms", 1))


def _bounded_duration(ms: int) -> int:
    """``ms`` if state can hold it (:data:`~upsertmat.impls.settings.MAX_TIME_MS`)."""
    if ms > MAX_TIME_MS:
        raise ValueError(f"a duration must be at most {MAX_TIME_MS} ms (2**62 - 1)")
    return ms


def _enum_parser(enum_type: Any, *, upper: bool) -> Callable[[Any], Any]:
    def parse(value: Any) -> Any:
        text = str(value).strip()
        text = text.upper() if upper else text.lower()
        try:
            return enum_type(text)
        except ValueError:
            choices = ", ".join(member.value for member in enum_type)
            raise ValueError(f"expected one of {choices}") from None

    return parse


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise ValueError("expected true or false")
    return text == "true"


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not re.fullmatch(r"\s*\d+\s*", str(value)):
        raise ValueError("expected a positive integer")
    number = int(str(value))
    if number <= 0:
        raise ValueError("expected a positive integer")
    return number


def _non_negative_int(value: Any) -> int:
    if isinstance(value, bool) or not re.fullmatch(r"\s*\d+\s*", str(value)):
        raise ValueError("expected a non-negative integer (0 = off)")
    return int(str(value))


def _budget(value: Any) -> int:
    if isinstance(value, bool) or not re.fullmatch(r"\s*\d+\s*", str(value)):
        raise ValueError("expected a non-negative integer (0 = unbounded)")
    return int(str(value))


_PARSERS: dict[str, Callable[[Any], Any]] = {
    STRATEGY: _enum_parser(Strategy, upper=True),
    THRESHOLD_HIGH: _positive_int,
    THRESHOLD_LOW: _positive_int,
    BACKEND: _enum_parser(Backend, upper=False),
    TTL: parse_duration_ms,
    TIME_DOMAIN: _enum_parser(TimeDomain, upper=False),
    UPDATE_TYPE: _enum_parser(UpdateType, upper=False),
    EXPIRY_BUDGET: _budget,
    LMDB_DURABILITY: _enum_parser(LmdbDurability, upper=False),
    CHECKPOINT_INTERVAL: _positive_int,
    ASYNC_STATE: _boolean,
    CONFLICT_STRATEGY: _enum_parser(ConflictBehavior, upper=True),
    MISS_ROWS: _non_negative_int,
}
KNOWN_KEYS: tuple[str, ...] = tuple(_PARSERS)


def flatten(mapping: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys (``{"state": {"backend": {"type": x}}}`` -> ``state.backend.type``)."""
    flat: dict[str, Any] = {}
    for key, value in mapping.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def load_config_file(path: Path) -> dict[str, Any]:
    """The flattened key/value mapping of a YAML config file. ConfigError if unreadable."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot read config file {path}: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is not valid YAML: {error}") from error
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file {path} must hold a mapping of keys to values")
    return flatten(data)


def parse_set_option(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` -> ``(KEY, VALUE)``. ConfigError if there is no ``=``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set expects KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def build_settings(layers: Iterable[tuple[str, Mapping[str, Any]]], base: Settings | None = None) -> Settings:
    """Apply ``(source name, {key: value})`` layers in order over ``base`` (defaults).

    Later layers win. Raises ConfigError naming the key, value and source on any problem,
    and when ``threshold.high <= threshold.low``.
    """
    values: dict[str, Any] = {}
    for source, layer in layers:
        for key, raw in layer.items():
            parser = _PARSERS.get(key)
            if parser is None:
                known = "\n  ".join(KNOWN_KEYS)
                raise ConfigError(
                    f"unknown configuration key {key!r} (from {source}); known keys:\n  {known}"
                )
            try:
                values[key] = parser(raw)
            except ValueError as error:
                raise ConfigError(f"bad value {raw!r} for {key} (from {source}): {error}") from None
    settings = base or Settings()
    ttl = settings.ttl
    ttl = replace(
        ttl,
        ttl_ms=values.get(TTL, ttl.ttl_ms),
        time_domain=values.get(TIME_DOMAIN, ttl.time_domain),
        update_type=values.get(UPDATE_TYPE, ttl.update_type),
    )
    settings = replace(
        settings,
        strategy=values.get(STRATEGY, settings.strategy),
        backend=values.get(BACKEND, settings.backend),
        ttl=ttl,
        threshold_high=values.get(THRESHOLD_HIGH, settings.threshold_high),
        threshold_low=values.get(THRESHOLD_LOW, settings.threshold_low),
        lmdb_durability=values.get(LMDB_DURABILITY, settings.lmdb_durability),
        checkpoint_interval=values.get(CHECKPOINT_INTERVAL, settings.checkpoint_interval),
        async_state=values.get(ASYNC_STATE, settings.async_state),
        conflict=values.get(CONFLICT_STRATEGY, settings.conflict),
        expiry_budget=values.get(EXPIRY_BUDGET, settings.expiry_budget),
        miss_rows=values.get(MISS_ROWS, settings.miss_rows),
    )
    high, low = settings.threshold_high, settings.threshold_low
    if high is not None and low is not None and high <= low:
        raise ConfigError(f"{THRESHOLD_HIGH} ({high}) must be greater than {THRESHOLD_LOW} ({low})")
    return settings
