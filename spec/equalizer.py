"""Equalizers: what "two rows are equal" means for matching (docs/spec.md section 3).

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


def _fold(value: JsonValue) -> JsonValue:
    """``value`` with every string (nested ones and object keys included) case-folded."""
    if isinstance(value, str):
        return value.casefold()
    if isinstance(value, list):
        return [_fold(item) for item in value]
    if isinstance(value, dict):
        return {key.casefold(): _fold(item) for key, item in value.items()}
    return value


class CaseInsensitiveEqualizer:
    """Strings compare case-insensitively (Unicode ``casefold``); everything else canonically.

    ``"ABC"`` matches ``"abc"`` and ``"Straße"`` matches ``"STRASSE"``; ``1`` still differs from
    ``1.0`` and from ``"1"``. Two object keys that fold alike collapse (the later wins), a
    documented edge of folding whole objects. O(size of the values).
    """

    name = "case-insensitive"
    fingerprint = _digest("case-insensitive/casefold/v1")

    def normalize(self, values: Sequence[JsonValue]) -> bytes:
        """``canonical`` of the values with strings case-folded."""
        return canonical([_fold(value) for value in values])

    def __repr__(self) -> str:
        return "CaseInsensitiveEqualizer()"


class IgnoreColumnsEqualizer:
    """Values are equal when they are canonically equal after dropping the given positions.

    ``positions`` index the values handed to ``normalize``: the whole row without an upsert
    key, the upsert-key projection with one (so without an upsert key, ``ignore-columns:2``
    makes rows that differ only in column 2 match). Positions beyond the values are ignored.
    The fingerprint covers the positions. O(size of the values).
    """

    name = "ignore-columns"

    def __init__(self, positions: Sequence[int]) -> None:
        if not positions or any(position < 0 for position in positions):
            raise ValueError(f"ignore-columns needs non-negative positions, got {list(positions)}")
        self.positions = tuple(sorted(set(positions)))
        self.fingerprint = _digest("ignore-columns/v1/" + ",".join(map(str, self.positions)))

    def normalize(self, values: Sequence[JsonValue]) -> bytes:
        """``canonical`` of the values at every position not ignored."""
        ignored = self.positions
        return canonical([value for index, value in enumerate(values) if index not in ignored])

    @property
    def spec(self) -> str:
        """The configuration name that builds this equalizer, e.g. ``ignore-columns:2,3``."""
        return f"{self.name}:{','.join(map(str, self.positions))}"

    def __repr__(self) -> str:
        return f"IgnoreColumnsEqualizer({list(self.positions)})"


def equalizer_spec(equalizer: Equalizer) -> str:
    """The configuration name of ``equalizer`` (``canonical``, ``ignore-columns:2``...)."""
    spec = getattr(equalizer, "spec", None)
    return spec if isinstance(spec, str) else equalizer.name


def parse_equalizer(text: str) -> Equalizer:
    """The built-in equalizer a configuration name selects.

    ``canonical`` (default), ``case-insensitive``, ``ignore-columns:I[,J...]`` (0-based
    positions within the compared values). ValueError naming the choices otherwise. Only
    these names are accepted: a name never imports or runs code.
    """
    name, sep, argument = text.strip().partition(":")
    if name == "canonical" and not sep:
        return DEFAULT_EQUALIZER
    if name == "case-insensitive" and not sep:
        return CaseInsensitiveEqualizer()
    if name == "ignore-columns" and sep:
        parts = [part.strip() for part in argument.split(",")]
        if all(part.isdigit() for part in parts):
            return IgnoreColumnsEqualizer([int(part) for part in parts])
    raise ValueError(
        f"unknown equalizer {text!r}; known: canonical, case-insensitive, ignore-columns:I[,J...]"
    )
