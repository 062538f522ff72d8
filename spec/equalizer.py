"""Equalizers: what "two rows are equal" means for matching (DESIGN section 3).

An equalizer maps the projected values of a row to a ``bytes`` key; two projections are equal
exactly when their keys are equal. Because the key is bytes, a heap backend (which compares
keys) and a byte backend (which stores them) cannot disagree. ``identity`` (name and
fingerprint) is what a snapshot records so a restore can refuse a different equalizer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .encoding import JsonValue, canonical


@runtime_checkable
class Equalizer(Protocol):
    """Decides equality of projected rows through a deterministic ``normalize``."""

    @property
    def name(self) -> str:
        """A short stable name, e.g. ``"canonical"``."""
        ...

    @property
    def fingerprint(self) -> str:
        """A digest of everything that changes the equalizer's answers (its parameters)."""
        ...

    def normalize(self, values: Sequence[JsonValue]) -> bytes:
        """The key of ``values``; must be deterministic across processes and machines."""
        ...


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class CanonicalEqualizer:
    """The default: values are equal when their canonical encodings are equal (type-aware)."""

    name = "canonical"
    fingerprint = _digest("canonical/v1")

    def normalize(self, values: Sequence[JsonValue]) -> bytes:
        """``canonical(values)``. O(size of the values)."""
        return canonical(values)

    def __repr__(self) -> str:
        return "CanonicalEqualizer()"


DEFAULT_EQUALIZER = CanonicalEqualizer()
