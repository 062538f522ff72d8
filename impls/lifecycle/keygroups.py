"""Key groups: the unit of rescaling (Flink's scheme).

Every context key hashes to one of ``max_parallelism`` key groups; operator instance ``i`` of
``p`` owns the contiguous range of groups :func:`key_group_range` gives it. State moves
between parallelisms by whole key groups, so a savepoint taken at parallelism ``p`` restores
at any ``q <= max_parallelism``: each new instance reads exactly the groups of its range.

A state directory restored as one instance records its :class:`Partition` (the key groups it
owns), so it can tell the changes routed to it from the others.

The hash is the first 8 bytes of BLAKE2b of the context key (its canonical bytes), so it is
the same in every process, on every machine and for every backend (Python's ``hash`` is
salted per process and would not be).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

DEFAULT_MAX_PARALLELISM = 128
"""Key groups when nothing else is configured (Flink's default lower bound)."""

MAX_MAX_PARALLELISM = 1 << 15
"""The most key groups a savepoint may have (32,768, Flink's upper bound): a restore walks its
instance's range of groups, so the bound keeps that walk small."""


def check_parallelism(parallelism: int, max_parallelism: int) -> None:
    """ValueError unless ``1 <= parallelism <= max_parallelism <= MAX_MAX_PARALLELISM``."""
    if not 1 <= max_parallelism <= MAX_MAX_PARALLELISM:
        raise ValueError(
            f"max parallelism must be between 1 and {MAX_MAX_PARALLELISM}, got {max_parallelism}"
        )
    if not 1 <= parallelism <= max_parallelism:
        raise ValueError(
            f"parallelism must be between 1 and the max parallelism {max_parallelism}, got {parallelism}"
        )


def key_group(context: bytes, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> int:
    """The key group of a context key, in ``[0, max_parallelism)``. O(len(context))."""
    digest = hashlib.blake2b(context, digest_size=8).digest()
    return int.from_bytes(digest, "big") % max_parallelism


def key_group_range(index: int, parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> range:
    """The key groups operator instance ``index`` of ``parallelism`` owns (contiguous).

    Instance ``i`` owns ``[ceil(i * m / p), ceil((i + 1) * m / p))``: the ranges partition
    ``[0, m)`` and differ in size by at most one.
    """
    check_parallelism(parallelism, max_parallelism)
    if not 0 <= index < parallelism:
        raise ValueError(f"operator index must be between 0 and {parallelism - 1}, got {index}")
    start = -(-index * max_parallelism // parallelism)
    stop = -(-(index + 1) * max_parallelism // parallelism)
    return range(start, stop)


def operator_index(group: int, parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> int:
    """The instance of ``parallelism`` that owns key group ``group`` (inverse of the ranges)."""
    check_parallelism(parallelism, max_parallelism)
    if not 0 <= group < max_parallelism:
        raise ValueError(f"key group must be in [0, {max_parallelism}), got {group}")
    return group * parallelism // max_parallelism


def route(context: bytes, parallelism: int, max_parallelism: int = DEFAULT_MAX_PARALLELISM) -> int:
    """The operator instance that owns ``context`` at ``parallelism``."""
    return operator_index(key_group(context, max_parallelism), parallelism, max_parallelism)


@dataclass(frozen=True)
class Partition:
    """Operator instance ``index`` of ``parallelism`` over ``max_parallelism`` key groups: what a
    state directory restored by ``restore --parallelism Q --index I`` owns (and a savepoint of
    it holds). ValueError unless ``1 <= parallelism <= max_parallelism <= MAX_MAX_PARALLELISM``
    and ``0 <= index < parallelism``."""

    max_parallelism: int
    parallelism: int
    index: int

    def __post_init__(self) -> None:
        key_group_range(self.index, self.parallelism, self.max_parallelism)  # checks every bound

    @property
    def groups(self) -> range:
        """The key groups it owns (contiguous)."""
        return key_group_range(self.index, self.parallelism, self.max_parallelism)

    def owns(self, context: bytes) -> bool:
        """True if the context key ``context`` is routed to this instance. O(len(context))."""
        return key_group(context, self.max_parallelism) in self.groups

    def within(self, other: Partition) -> bool:
        """True if every key group of this instance is one of ``other``'s (same key groups)."""
        mine, theirs = self.groups, other.groups
        return (
            self.max_parallelism == other.max_parallelism
            and theirs.start <= mine.start <= mine.stop <= theirs.stop
        )

    def __str__(self) -> str:
        groups = self.groups
        return (
            f"instance {self.index} of {self.parallelism} (key groups {groups.start}-{groups.stop - 1} of "
            f"{self.max_parallelism})"
        )

    def to_json(self) -> dict[str, int]:
        """The JSON record kept in manifests."""
        return {"max_parallelism": self.max_parallelism, "parallelism": self.parallelism, "index": self.index}

    @classmethod
    def from_json(cls, record: object) -> Partition:
        """The partition of a manifest's record; ValueError naming what is wrong otherwise."""
        fields = ("max_parallelism", "parallelism", "index")
        if not (isinstance(record, dict) and set(record) == set(fields)):
            raise ValueError(f"'partition' must be an object of exactly {', '.join(fields)}")
        if not all(isinstance(record[name], int) and not isinstance(record[name], bool) for name in fields):
            raise ValueError("'partition' must hold integers")
        try:
            return cls(record["max_parallelism"], record["parallelism"], record["index"])
        except ValueError as error:
            raise ValueError(f"'partition': {error}") from None
