"""Keyed state that strategies are written against, per backend.

:func:`open_backend` is the entry point: it builds the backend ``settings.backend`` names.
Byte backends (rocksdb, lmdb) keep their database in ``settings.state_dir / <backend> /
<name>`` (locked while open), or in a temporary directory removed on close when
``state_dir`` is None.
"""

from __future__ import annotations

from pathlib import Path

from ..settings import Backend, Settings
from .base import MapState, SortedMapState, StateBackend, Value, ValueState
from .counting import Counters, CountingBackend
from .errors import BackendUnavailableError, CorruptStateError, StateError, StateLockedError
from .heap import HeapBackend, HeapMapState, HeapSortedMapState, HeapValueState

__all__ = [
    "BackendUnavailableError",
    "CorruptStateError",
    "Counters",
    "CountingBackend",
    "HeapBackend",
    "HeapMapState",
    "HeapSortedMapState",
    "HeapValueState",
    "MapState",
    "SortedMapState",
    "StateBackend",
    "StateError",
    "StateLockedError",
    "Value",
    "ValueState",
    "backend_database",
    "open_backend",
]


def backend_database(settings: Settings, *, name: str = "materializer") -> Path | None:
    """Where :func:`open_backend` keeps the database of a byte backend under ``state_dir``
    (None for heap, spark, or without ``state_dir``): lets a caller tell a missing database
    from a new one before opening creates it."""
    if settings.state_dir is None or settings.backend not in (Backend.ROCKSDB, Backend.LMDB):
        return None
    from .directory import DB_NAME

    root: Path = Path(settings.state_dir) / settings.backend.value / name
    return root / DB_NAME


def open_backend(settings: Settings, *, name: str = "materializer") -> StateBackend:
    """Open the state backend ``settings.backend`` for the operator instance ``name``.

    heap: a fresh :class:`HeapBackend` (``state_dir`` is ignored: heap state does not persist).
    rocksdb / lmdb: the database in ``settings.state_dir / <backend> / name`` (created if
    missing, locked: :class:`StateLockedError` if another backend holds it), or a temporary
    one when ``state_dir`` is None, writing one durable commit per
    ``settings.checkpoint_interval`` units (None: every unit; see :mod:`.deferred`). spark:
    :class:`BackendUnavailableError` (Spark state lives in the Spark pipeline, not in this
    process).
    """
    if settings.backend is Backend.HEAP:
        return HeapBackend()
    if settings.backend is Backend.SPARK:
        raise BackendUnavailableError(
            "backend 'spark' keeps state in Spark's state store and runs only inside the PySpark "
            "pipeline; use heap, rocksdb or lmdb here"
        )
    path = None if settings.state_dir is None else Path(settings.state_dir) / settings.backend.value / name
    if settings.backend is Backend.ROCKSDB:
        from .rocksdb import RocksdbBackend

        rocksdb = RocksdbBackend(path)
        rocksdb.commit_interval = settings.checkpoint_interval or 1
        return rocksdb
    if settings.backend is Backend.LMDB:
        from .lmdb import LmdbBackend

        lmdb = LmdbBackend(path, durability=settings.lmdb_durability)
        lmdb.commit_interval = settings.checkpoint_interval or 1
        return lmdb
    raise BackendUnavailableError(f"backend {settings.backend.value!r} is not available yet")
