"""LMDB keyed state (py-lmdb): one write transaction held open between commits.

Every state lives in LMDB's main database under the storage-key layout of codec.py (one
byte-ordered key space, states told apart by prefix). A write transaction stays open from one
``commit`` to the next, so reads see the uncommitted writes and ``commit`` makes them durable
atomically (then begins the next transaction). Ordered seeks use one cursor per transaction:
``set_range`` / ``prev`` / ``last``, no overlay to merge.

Durability (``LmdbDurability``, config key ``upsertmat.state.lmdb.durability``); every mode
survives a killed process (even SIGKILL): nothing committed is lost, no half transaction is
seen, and ``close`` syncs to disk. They differ on an OS crash or power loss:

- ``fast`` (default): ``writemap=True, sync=False``. A commit updates the pages in the shared
  memory map (the OS page cache) and the meta page last, about 1-2 µs. The OS may write the
  pages back in any order, so a crash may lose the last commits and can damage the file
  (LMDB cannot always detect that).
- ``safe``: ``writemap=False, sync=False``: commits go through write(2), about 10-20 µs. On
  file systems that preserve write order LMDB keeps the file intact; a crash may lose the
  last commits.
- ``full``: ``sync=True``: every commit is flushed to disk; a crash loses nothing. Costs a
  disk flush per commit.

Limits: LMDB keys are at most 511 bytes, so state prefix + context + user key must fit (a
clear ValueError otherwise — use rocksdb for very long keys). The map (a sparse file of that
apparent size) starts at ``map_size`` and doubles at a commit boundary whenever it is more
than half full (checked every 256 commits and at open); a single batch larger than the free
half raises a StateError that says so.

A full disk is an error, not a crash: with ``writemap`` a page written into a sparse file on a
full file system kills the process with SIGBUS, so the ``fast`` mode reserves real disk blocks
(``posix_fallocate``) for the used pages plus ``RESERVE_BYTES`` ahead, at open and every
``_RESERVE_EVERY`` commits, and a reservation that fails raises :class:`StorageFullError`.
The other modes write through write(2), which reports ENOSPC as an LMDB error.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import lmdb

from ..settings import LmdbDurability
from .base import Value
from .codec import META_PREFIX, ValueCodec, context_prefix, split_context, state_prefix, successor
from .deferred import DeferredCommits
from .directory import StateDirectory
from .errors import CorruptStateError, StateError, StorageError, StorageFullError
from .named import NamedStates

FORMAT_KEY = META_PREFIX + b"format"
FORMAT = b"upsertmat-lmdb/1"
DEFAULT_MAP_SIZE = 1 << 30
_GROWTH_CHECK_EVERY = 256
RESERVE_BYTES = 16 << 20
"""Disk blocks reserved ahead of the used pages in ``fast`` mode (far more than the pages
``_RESERVE_EVERY`` commits of small values allocate)."""
_RESERVE_EVERY = 16


def _environment(
    directory: Path, map_size: int, create: bool, durability: LmdbDurability
) -> lmdb.Environment:
    full = durability is LmdbDurability.FULL
    return lmdb.open(
        str(directory),
        map_size=map_size,
        subdir=True,
        create=create,
        sync=full,
        metasync=full,
        writemap=durability is LmdbDurability.FAST,
        readahead=False,
        max_dbs=0,
    )


class LmdbBackend(DeferredCommits):
    """The states of one operator instance in one LMDB environment.

    ``path``: the backend directory (locked while open; see directory.py), or None for a
    temporary environment removed on close. Raises StateLockedError if another backend holds
    ``path``, CorruptStateError if ``path`` is not a valid state directory.

    Commits: ``commit()`` ends a unit (an input); with ``commit_interval`` N > 1 (or while
    ``defer_commits`` holds them) the transaction stays open for N units. LMDB has no nested
    transactions under ``writemap``, so each put/delete then journals the bytes it replaces
    and ``rollback`` puts them back, undoing only the failed unit (:mod:`.deferred`).
    """

    name = "lmdb"
    supports_ordered = True

    def __init__(
        self,
        path: Path | None = None,
        *,
        map_size: int = DEFAULT_MAP_SIZE,
        durability: LmdbDurability = LmdbDurability.FAST,
    ) -> None:
        self._dir = StateDirectory(path, "lmdb")
        self._map_size = map_size
        self._durability = durability
        try:
            self._dir.prepare(self._create)
            self.env = self._open(self._dir.db)
        except BaseException:
            self._dir.close()
            raise
        self.path = self._dir.root
        self.codec = ValueCodec()
        self.max_key_size = self.env.max_key_size()
        self._commits = 0
        self._reserved = 0
        try:
            self._grow_if_needed()
            self._reserve()
        except BaseException:
            self.env.close()
            self._dir.close()
            raise
        self.txn = self.env.begin(write=True)
        self._cursor: lmdb.Cursor | None = None
        self._states = NamedStates(lambda kind, name: kind(self, name))
        self._dirty = False
        self._closed = False

    def _create(self, directory: Path) -> None:
        env = _environment(directory, self._map_size, create=True, durability=self._durability)
        try:
            with env.begin(write=True) as txn:
                txn.put(FORMAT_KEY, FORMAT)
            env.sync(True)
        finally:
            env.close()

    def _open(self, directory: Path) -> lmdb.Environment:
        try:
            env = _environment(directory, self._map_size, create=False, durability=self._durability)
            with env.begin() as txn:
                marker = txn.get(FORMAT_KEY)
        except lmdb.Error as error:
            raise CorruptStateError(f"cannot open the LMDB state at {directory}: {error}") from error
        if marker != FORMAT:
            env.close()
            raise CorruptStateError(
                f"{directory} is not an upsertmat LMDB state (format marker {marker!r}, expected {FORMAT!r})"
            )
        return env

    def cursor(self) -> lmdb.Cursor:
        """The cursor of the current write transaction (callers always reposition it)."""
        if self._cursor is None:
            self._cursor = self.txn.cursor()
        return self._cursor

    def put(self, storage_key: bytes, data: bytes) -> None:
        """One put in the open transaction, with clear errors for LMDB's limits."""
        try:
            journal = self.journal
            if journal is None:
                self.txn.put(storage_key, data)
            else:  # one lookup: replace hands back the bytes it overwrites (None: a new key)
                journal.append((self, storage_key, None, self.txn.replace(storage_key, data)))
        except lmdb.BadValsizeError:
            raise ValueError(
                f"LMDB keys are limited to {self.max_key_size} bytes; this state key has "
                f"{len(storage_key)} (context and user key too long; the rocksdb backend has no such limit)"
            ) from None
        except lmdb.MapFullError:
            raise self._full() from None
        self._dirty = True

    def delete(self, storage_key: bytes) -> None:
        """One delete in the open transaction."""
        journal = self.journal
        if journal is not None:
            previous = self.txn.pop(storage_key)  # one lookup: the bytes deleted, or None
            if previous is not None:
                journal.append((self, storage_key, None, previous))
                self._dirty = True
            return
        if self.txn.delete(storage_key):
            self._dirty = True

    def undo(self, storage_key: bytes, key: None, previous: bytes | None) -> None:
        """Put back the bytes one journaled put/delete replaced (rollback of a unit)."""
        if previous is None:
            self.txn.delete(storage_key)
        else:
            self.txn.put(storage_key, previous)

    def value_state(self, name: str) -> LmdbValueState:
        """The value state ``name``."""
        return self._states.get(name, LmdbValueState)

    def map_state(self, name: str) -> LmdbMapState:
        """The map state ``name`` (ordered, like every LMDB map)."""
        return self._states.get(name, LmdbMapState)

    def sorted_map_state(self, name: str) -> LmdbSortedMapState:
        """The sorted map state ``name``."""
        return self._states.get(name, LmdbSortedMapState)

    def _write(self) -> None:
        """Commit the open write transaction and begin the next (no-op if nothing changed)."""
        if not self._dirty:
            return
        self._cursor = None
        try:
            self.txn.commit()
        except lmdb.Error as error:
            failure = self.classify(error)
            assert failure is not None
            self._cursor = None
            self.txn = self.env.begin(write=True)  # the failed transaction is gone
            self._dirty = False
            raise failure from error
        self._dirty = False
        self._commits += 1
        self.durable_commits += 1
        batch = self._units > 1  # a batch of many inputs: check the room after every one
        if batch or self._commits % _GROWTH_CHECK_EVERY == 0:
            self._grow_if_needed()
        if batch or self._commits % _RESERVE_EVERY == 0:
            self._reserve()
        self.txn = self.env.begin(write=True)

    def _reserve(self) -> None:
        """In ``fast`` (writemap) mode, allocate disk blocks for the used pages plus the reserve."""
        if self._durability is not LmdbDurability.FAST:
            return
        info = self.env.info()
        wanted = min((info["last_pgno"] + 1) * self.env.stat()["psize"] + RESERVE_BYTES, info["map_size"])
        if wanted <= self._reserved:
            return
        data = self._dir.db / "data.mdb"
        try:
            descriptor = os.open(data, os.O_RDWR | os.O_CLOEXEC)
            try:
                os.posix_fallocate(descriptor, 0, wanted)
            finally:
                os.close(descriptor)
        except OSError as error:
            raise StorageFullError(
                f"the LMDB state at {self._dir.db} cannot reserve {wanted} bytes of disk: {error.strerror}"
            ) from None
        self._reserved = wanted

    def classify(self, error: Exception) -> StateError | None:
        """An LMDB error as a StateError naming the database; None for anything else."""
        if not isinstance(error, lmdb.Error):
            return None
        where = f"the LMDB state at {self._dir.db}"
        if isinstance(
            error, lmdb.CorruptedError | lmdb.PageNotFoundError | lmdb.BadRslotError | lmdb.InvalidError
        ):
            return CorruptStateError(f"damaged state: {where} cannot be read: {error}")
        if isinstance(error, lmdb.MapFullError):
            return self._full()
        if "No space left" in str(error):
            return StorageFullError(f"{where} cannot be written: {error}")
        return StorageError(f"{where} failed: {error}")

    def _discard(self) -> None:
        """Abort the open write transaction (every write since the last commit) and begin anew."""
        self._cursor = None
        self.txn.abort()
        self._dirty = False
        self.txn = self.env.begin(write=True)

    def _full(self) -> StateError:
        size = self.env.info()["map_size"]
        return StateError(
            f"the LMDB state at {self._dir.db} is full (map size {size} bytes) within one batch of "
            "writes; open it with a larger map_size"
        )

    def _grow_if_needed(self) -> None:
        """Double the map while it is more than half used (only between transactions)."""
        info = self.env.info()
        used = (info["last_pgno"] + 1) * self.env.stat()["psize"]
        size = info["map_size"]
        if used * 2 > size:
            while used * 2 > size:
                size *= 2
            self.env.set_mapsize(size)

    def close(self) -> None:
        """Abort uncommitted writes, sync, close the environment and release the lock."""
        if self._closed:
            return
        self._closed = True
        self._cursor = None
        try:
            self.txn.abort()
            self.env.sync(True)
            self.env.close()
        finally:
            self._dir.close()


class LmdbValueState:
    """``ValueState``: storage key = state prefix + context. One LMDB get/put per call."""

    def __init__(self, backend: LmdbBackend, name: str) -> None:
        self._backend = backend
        self.name = name
        self._prefix = state_prefix(b"v", name)
        self._pack = backend.codec.pack
        self._unpack = backend.codec.unpack

    def get(self, context: bytes) -> Value | None:
        """One B-tree lookup in the open transaction."""
        data = self._backend.txn.get(self._prefix + context)
        return None if data is None else self._unpack(data, self.name, context)

    def get_many(self, contexts: Sequence[bytes]) -> list[Value | None]:
        """``[get(c) for c in contexts]``: ordered lookups in the one open transaction (async
        state), sorted by storage key so neighbouring lookups share B-tree pages."""
        txn_get, prefix, unpack, name = self._backend.txn.get, self._prefix, self._unpack, self.name
        found: list[Value | None] = [None] * len(contexts)
        for position in sorted(range(len(contexts)), key=contexts.__getitem__):
            data = txn_get(prefix + contexts[position])
            if data is not None:
                found[position] = unpack(data, name, contexts[position])
        return found

    def put(self, context: bytes, value: Value) -> None:
        """One B-tree insert in the open transaction."""
        self._backend.put(self._prefix + context, self._pack(value))

    def delete(self, context: bytes) -> None:
        """One B-tree delete in the open transaction."""
        self._backend.delete(self._prefix + context)

    def contexts(self) -> Iterator[bytes]:
        """Every context with a value: a prefix scan (snapshot)."""
        found: list[bytes] = []
        cursor = self._backend.cursor()
        prefix = self._prefix
        if cursor.set_range(prefix):
            key: bytes  # py-lmdb hands out bytes unless buffers=True
            for key in cursor.iternext(keys=True, values=False):  # type: ignore[assignment]
                if not key.startswith(prefix):
                    break
                found.append(key[len(prefix) :])
        return iter(found)


class LmdbMapState:
    """``MapState`` (and, with the seeks of the subclass, ``SortedMapState``).

    Storage key = context prefix (state prefix + len32(context) + context) + user key: one
    LMDB get/put/delete per point call.
    """

    _kind = b"m"

    def __init__(self, backend: LmdbBackend, name: str) -> None:
        self._backend = backend
        self.name = name
        self._prefix = state_prefix(self._kind, name)
        self._pack = backend.codec.pack
        self._unpack = backend.codec.unpack
        self._last_context: bytes | None = None
        self._last_prefix = b""

    def _context_prefix(self, context: bytes) -> bytes:
        if context != self._last_context:
            self._last_prefix = context_prefix(self._prefix, context)
            self._last_context = context
        return self._last_prefix

    def get(self, context: bytes, key: bytes) -> Value | None:
        """One B-tree lookup."""
        storage_key = self._context_prefix(context) + key
        data = self._backend.txn.get(storage_key)
        return None if data is None else self._unpack(data, self.name, storage_key)

    def get_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Value | None]:
        """``[get(c, k) for c, k in pairs]``: ordered lookups in the one open transaction
        (async state), sorted by storage key so neighbouring lookups share B-tree pages."""
        storage_keys = [context_prefix(self._prefix, context) + key for context, key in pairs]
        txn_get, unpack, name = self._backend.txn.get, self._unpack, self.name
        found: list[Value | None] = [None] * len(pairs)
        for position in sorted(range(len(pairs)), key=storage_keys.__getitem__):
            data = txn_get(storage_keys[position])
            if data is not None:
                found[position] = unpack(data, name, storage_keys[position])
        return found

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        """One B-tree insert."""
        self._backend.put(self._context_prefix(context) + key, self._pack(value))

    def delete(self, context: bytes, key: bytes) -> None:
        """One B-tree delete."""
        self._backend.delete(self._context_prefix(context) + key)

    def _raw_items(self, prefix: bytes) -> list[tuple[bytes, bytes]]:
        cursor = self._backend.cursor()
        found: list[tuple[bytes, bytes]] = []
        if cursor.set_range(prefix):
            storage_key: bytes
            data: bytes
            for storage_key, data in cursor:  # type: ignore[assignment]
                if not storage_key.startswith(prefix):
                    break
                found.append((storage_key, data))
        return found

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        """Entries in ascending user-key order: one range scan (snapshot)."""
        prefix = self._context_prefix(context)
        start = len(prefix)
        return iter(
            [(key[start:], self._unpack(data, self.name, key)) for key, data in self._raw_items(prefix)]
        )

    def clear(self, context: bytes) -> None:
        """Delete every entry of ``context``: a range scan and one delete per entry."""
        for storage_key, _ in self._raw_items(self._context_prefix(context)):
            self._backend.delete(storage_key)

    def contexts(self) -> Iterator[bytes]:
        """Contexts with an entry: one seek per context (snapshot)."""
        found: list[bytes] = []
        cursor = self._backend.cursor()
        positioned = cursor.set_range(self._prefix)
        while positioned:
            storage_key: bytes = cursor.key()  # type: ignore[assignment]
            if not storage_key.startswith(self._prefix):
                break
            context, _ = split_context(self._prefix, storage_key)
            found.append(context)
            following = successor(context_prefix(self._prefix, context))
            positioned = following is not None and cursor.set_range(following)
        return iter(found)


class LmdbSortedMapState(LmdbMapState):
    """``SortedMapState``: cursor seeks in the open transaction."""

    _kind = b"s"

    def _entry(self, cursor: lmdb.Cursor, prefix: bytes) -> tuple[bytes, Value] | None:
        storage_key: bytes = cursor.key()  # type: ignore[assignment]
        if not storage_key.startswith(prefix):
            return None
        data: bytes = cursor.value()  # type: ignore[assignment]
        return storage_key[len(prefix) :], self._unpack(data, self.name, storage_key)

    def _below(self, prefix: bytes, bound: bytes | None) -> tuple[bytes, Value] | None:
        """The greatest entry of ``prefix`` strictly below ``bound`` (None: the end of the database)."""
        cursor = self._backend.cursor()
        positioned = cursor.prev() if bound is not None and cursor.set_range(bound) else cursor.last()
        return self._entry(cursor, prefix) if positioned else None

    def last(self, context: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry: one seek and one step back."""
        prefix = self._context_prefix(context)
        return self._below(prefix, successor(prefix))

    def first(self, context: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry: one seek."""
        return self.ceiling(context, b"")

    def ceiling(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry at or above ``key``: one seek."""
        prefix = self._context_prefix(context)
        cursor = self._backend.cursor()
        return self._entry(cursor, prefix) if cursor.set_range(prefix + key) else None

    def before(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry below ``key``: one seek and one step back."""
        prefix = self._context_prefix(context)
        return self._below(prefix, prefix + key)
