"""Key groups: the unit of rescaling (Flink's scheme).

Every context key hashes to one of ``max_parallelism`` key groups; operator instance ``i`` of
``p`` owns the contiguous range of groups :func:`key_group_range` gives it. State moves
between parallelisms by whole key groups, so a savepoint taken at parallelism ``p`` restores
at any ``q <= max_parallelism``: each new instance reads exactly the groups of its range.

The hash is the first 8 bytes of BLAKE2b of the context key (its canonical bytes), so it is
the same in every process, on every machine and for every backend (Python's ``hash`` is
salted per process and would not be).
"""

from __future__ import annotations

import hashlib

DEFAULT_MAX_PARALLELISM = 128
"""Key groups when nothing else is configured (Flink's default lower bound)."""


def check_parallelism(parallelism: int, max_parallelism: int) -> None:
    """ValueError unless ``1 <= parallelism <= max_parallelism``."""
    if max_parallelism < 1:
        raise ValueError(f"max parallelism must be >= 1, got {max_parallelism}")
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
