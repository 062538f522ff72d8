"""The shipped configuration defaults (``upsertmat/data/defaults.yaml``), the lowest layer.

Every command and job file starts from this layer; ``--config``, job files and ``--set`` are
layered on top of it (:mod:`upsertmat.impls.config` parses and validates the keys).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any

import yaml

from upsertmat.impls.config import ConfigError, flatten

DEFAULTS_SOURCE = "built-in defaults (upsertmat/data/defaults.yaml)"


def default_layer() -> dict[str, Any]:
    """The shipped defaults file as a flat key/value mapping (read once per process)."""
    return dict(_defaults())


@functools.cache
def _defaults() -> dict[str, Any]:
    try:
        text = resources.files("upsertmat").joinpath("data/defaults.yaml").read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"cannot read the {DEFAULTS_SOURCE}: {error.strerror or error}") from None
    data = yaml.safe_load(text)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{DEFAULTS_SOURCE} must hold a mapping")
    return flatten(data)
