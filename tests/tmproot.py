"""Where the test run's temporary directories go: memory (``/dev/shm``) when it has room.

The suite creates thousands of state directories (a RocksDB database or an LMDB environment per
Hypothesis example, reopened on every ``restart`` step), and on a virtual disk their ``fsync``,
``mkdir`` and ``unlink`` calls are a quarter of the default run's time: ``pytest -m "not slow"``
took 794 s with its directories on disk and 597 s on ``/dev/shm`` (same build, 2 workers, a
2-core machine). What the tests check does not change: RocksDB, LMDB and SQLite run on tmpfs as
on any file system, and a killed process's files outlive it there as on disk.

:func:`memory_temproot` decides; ``tests/conftest.py`` points pytest's base directory there
(``PYTEST_DEBUG_TEMPROOT``, which pytest-xdist's workers inherit). ``UPSERTMAT_TEST_TMPFS=0``
keeps the system's temporary directory; a run given ``--basetemp`` or ``PYTEST_DEBUG_TEMPROOT``
keeps what it was given.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

CANDIDATE = Path("/dev/shm")
MIN_FREE_BYTES = 8 << 30
"""Room the tmpfs must have free: the default run's directories peak at ~0.5 GB, and a full
memory file system would fail tests for a reason that is not theirs."""


def is_tmpfs(path: Path, mounts: str) -> bool:
    """Whether ``path`` is a mount point of type tmpfs in ``mounts`` (``/proc/mounts``' text)."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[1] == str(path) and fields[2] == "tmpfs":
            return True
    return False


def memory_temproot(
    environ: Mapping[str, str], candidate: Path = CANDIDATE, min_free: int = MIN_FREE_BYTES
) -> Path | None:
    """``candidate`` if the run should keep its temporary directories there, else None: it is a
    writable tmpfs with ``min_free`` bytes free, and neither ``UPSERTMAT_TEST_TMPFS=0`` nor
    ``PYTEST_DEBUG_TEMPROOT`` says otherwise."""
    if environ.get("UPSERTMAT_TEST_TMPFS", "1") == "0" or environ.get("PYTEST_DEBUG_TEMPROOT"):
        return None
    try:
        mounts = Path("/proc/mounts").read_text(encoding="utf-8")
        if not is_tmpfs(candidate, mounts) or not os.access(candidate, os.W_OK | os.X_OK):
            return None
        stats = os.statvfs(candidate)
    except OSError:
        return None
    if stats.f_bavail * stats.f_frsize < min_free:
        return None
    return candidate
