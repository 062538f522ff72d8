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

Limits: LMDB keys are at most 511 bytes (``max_key_size``). Keys that fit are stored exactly
as codec.py lays them out; longer ones are replaced by SHA-256 digests, so contexts and user
keys of any length work, with the same results as the other backends:

- a value state whose state prefix + context is too long keys the entry by ``b"V"`` + name +
  SHA-256(context) (``LONG_VALUE_KIND``);
- a map state entry whose key is too long (a long context, a long user key or both) goes
  under state prefix + ``LONG_ENTRY`` + SHA-256(context) + SHA-256(user key);
- a sorted map state keys *every* entry of a context that would not leave room for an 8-byte
  user key (``SEQ_SIZE``) by state prefix + ``LONG_CONTEXT`` + SHA-256(context) + user key:
  fixed size, so the context's entries still form one range ordered by user key. A user key
  that does not fit beside its context (more than 511 - 38 - len(name) bytes under a long
  context) is refused with a ValueError naming the limit: the strategies' sorted maps only
  hold 8-byte sequence numbers and timer keys of at most 272 bytes (timers.py).

The replaced context (and user key) is kept framed (``len32 + bytes``) at the head of the
value, so ``contexts`` and ``items`` return the real keys, and every read, put and delete
checks it: two keys with one digest are a CorruptStateError, never each other's data.
``contexts`` lists a long context where its plain key would sort (byte order for value states;
length, then bytes for maps), so the order of keys that fit is as before. Cost: keys that fit
pay one length check per access and nothing else; a long key costs a SHA-256 of it, its framed
copy in the value, and a read-before-write (``replace``/``pop``) on put and delete; once a map
state holds a long entry, its ``items`` and ``clear`` take one more seek. A state directory
written before keys were hashed holds only keys that fit, which are read as before (same
format marker).

The map (a sparse file of that apparent size) starts at ``map_size`` and doubles at a commit
boundary whenever it is more than half full (checked every 256 commits and at open); a single
batch larger than the free half raises a StateError that says so.

A full disk is an error, not a crash: with ``writemap`` a page written into a sparse file on a
full file system kills the process with SIGBUS, so the ``fast`` mode reserves real disk blocks
(``posix_fallocate``) for the used pages plus ``RESERVE_BYTES`` ahead, at open and every
``_RESERVE_EVERY`` commits, and a reservation that fails raises :class:`StorageFullError`.
A new environment is created through write(2) (before any reservation), and LMDB's own lock
file — another memory-mapped sparse file — is not used (``lock=False``): the backend's
directory lock gives one process exclusive use already. The other modes write through
write(2), which reports ENOSPC as an LMDB error.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import lmdb
import msgpack
from mypy_extensions import mypyc_attr

from ..settings import LmdbDurability
from .base import Value
from .codec import (
    META_PREFIX,
    ValueCodec,
    context_prefix,
    ext_hook,
    split_context,
    state_prefix,
    successor,
)
from .deferred import ABSENT, DeferredCommits
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

LONG_ENTRY = b"\xff\xff\xff\xfe"
"""In place of len32(context) in a map state: the entry is keyed by SHA-256(context) +
SHA-256(user key). No real context is that long, and it sorts after every real one."""
LONG_CONTEXT = b"\xff\xff\xff\xff"
"""In place of len32(context) in a sorted map state: the context is SHA-256(context)."""
LONG_VALUE_KIND = b"V"
"""The state kind byte of value-state entries keyed by SHA-256(context)."""
SEQ_SIZE = 8
"""A sorted map keeps a context's keys plain while they leave room for a user key this long."""
_LEN32 = struct.Struct(">I")
_unpackb = msgpack.unpackb


def _decoded(data: bytes, unpack: Callable[[bytes, str, bytes], Value], state: str, key: bytes) -> Value:
    """A stored value: msgpack's decoder called directly with ``ValueCodec.unpack``'s options
    (``raw=False, strict_map_key=False, ext_hook=ext_hook``; a Python call fewer per read than
    the codec's bound method), and on a failure ``unpack`` (the codec's), which raises the
    CorruptStateError naming ``state`` and ``key``. The one decoding of the hot path (a native
    call when compiled)."""
    try:
        return _unpackb(data, raw=False, strict_map_key=False, ext_hook=ext_hook)
    except Exception:
        return unpack(data, state, key)


def _environment(
    directory: Path, map_size: int, create: bool, durability: LmdbDurability, *, writemap: bool | None = None
) -> lmdb.Environment:
    """The LMDB environment in ``directory`` (``writemap``: default by ``durability``).

    Without LMDB's own lock file (``lock=False``): the backend's directory lock already gives
    one process exclusive use, the process has one write transaction at a time and no other
    reader, and the lock file is a memory-mapped sparse file that a full disk turns into a
    SIGBUS while it is initialised.
    """
    full = durability is LmdbDurability.FULL
    return lmdb.open(
        str(directory),
        map_size=map_size,
        subdir=True,
        create=create,
        sync=full,
        metasync=full,
        writemap=durability is LmdbDurability.FAST if writemap is None else writemap,
        readahead=False,
        max_dbs=0,
        lock=False,
    )


@mypyc_attr(allow_interpreted_subclasses=True)
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
            try:
                self._grow_if_needed()
                self._reserve()
                self.txn = self.env.begin(write=True)
            except lmdb.Error as error:
                raise self._open_failure(error, f"cannot open the LMDB state at {self._dir.db}") from error
        except BaseException:
            self.env.close()
            self._dir.close()
            raise
        self._cursor: lmdb.Cursor[bytes] | None = None
        self._states = NamedStates(lambda kind, name: kind(self, name))
        self._dirty = False
        self._closed = False
        # Value states holding pending writes (:class:`LmdbValueState`, *Overlay*), written
        # into the transaction at the durable commit.
        self._overlaid: list[LmdbValueState] = []

    def _create(self, directory: Path) -> None:
        """A new environment in ``directory`` holding the format marker. Written through
        write(2), not the memory map (``fast`` mode reserves disk blocks only once the
        environment is open), so a full disk is an error here, never a SIGBUS."""
        try:
            env = _environment(
                directory, self._map_size, create=True, durability=self._durability, writemap=False
            )
            try:
                with env.begin(write=True) as txn:
                    txn.put(FORMAT_KEY, FORMAT)
                env.sync(True)
            finally:
                env.close()
        except lmdb.Error as error:
            raise self._open_failure(error, f"cannot create the LMDB state at {directory}") from error

    def _open(self, directory: Path) -> lmdb.Environment:
        try:
            env = _environment(directory, self._map_size, create=False, durability=self._durability)
            with env.begin() as txn:
                marker = txn.get(FORMAT_KEY)
        except lmdb.Error as error:
            raise self._open_failure(error, f"cannot open the LMDB state at {directory}") from error
        if marker != FORMAT:
            env.close()
            raise CorruptStateError(
                f"{directory} is not an upsertmat LMDB state (format marker {marker!r}, expected {FORMAT!r})"
            )
        return env

    def cursor(self) -> lmdb.Cursor[bytes]:
        """The cursor of the current write transaction (callers always reposition it; the
        states read ``_cursor`` first and call this only when it is None)."""
        if self._cursor is None:
            self._cursor = self.txn.cursor()
        return self._cursor

    def put(self, storage_key: bytes, data: bytes) -> None:
        """One put in the open transaction, with clear errors for LMDB's limits (the states
        inline this for keys that fit)."""
        try:
            journal = self.journal
            if journal is None:
                self.txn.put(storage_key, data)
            else:  # one lookup: replace hands back the bytes it overwrites (None: a new key)
                journal.append((self, storage_key, None, self.txn.replace(storage_key, data)))
        except (lmdb.BadValsizeError, lmdb.MapFullError) as error:
            raise self.put_error(error, storage_key) from None
        self._dirty = True

    def put_error(self, error: lmdb.Error, storage_key: bytes) -> Exception:
        """The error to raise for a put that LMDB refused with BadValsizeError or MapFullError."""
        if isinstance(error, lmdb.MapFullError):
            return self._full()
        return ValueError(
            f"LMDB keys are limited to {self.max_key_size} bytes; this state key has "
            f"{len(storage_key)} (context and user key too long; the rocksdb backend has no such limit)"
        )

    def delete(self, storage_key: bytes) -> None:
        """One delete in the open transaction (the states inline this for keys that fit)."""
        journal = self.journal
        if journal is not None:
            previous = self.txn.pop(storage_key)  # one lookup: the bytes deleted, or None
            if previous is not None:
                journal.append((self, storage_key, None, previous))
                self._dirty = True
            return
        if self.txn.delete(storage_key):
            self._dirty = True

    def replace_long(self, state: str, storage_key: bytes, header: bytes, packed: bytes) -> None:
        """Put ``header + packed`` under a digest key; if the entry there starts with another
        header (a digest collision), put it back and raise CorruptStateError."""
        try:
            old = self.txn.replace(storage_key, header + packed)
        except lmdb.MapFullError:
            raise self._full() from None
        self._dirty = True
        if self.journal is not None:
            self.journal.append((self, storage_key, None, old))
        if old is not None and not old.startswith(header):
            self.txn.put(storage_key, old)
            raise _collision(state, storage_key)

    def pop_long(self, state: str, storage_key: bytes, header: bytes) -> None:
        """Delete the entry under a digest key if it starts with ``header``; CorruptStateError
        (and nothing deleted) if it is another key's (a digest collision)."""
        old = self.txn.pop(storage_key)
        if old is None:
            return
        self._dirty = True
        if self.journal is not None:
            self.journal.append((self, storage_key, None, old))
        if not old.startswith(header):
            self.txn.put(storage_key, old)
            raise _collision(state, storage_key)

    def scan(
        self, prefix: bytes, *, start: bytes | None = None, values: bool = True
    ) -> list[tuple[bytes, bytes]]:
        """(storage key, data) of every key starting with ``prefix`` (from ``start`` on), in key
        order; data is ``b""`` unless ``values``. A snapshot: callers may write afterwards."""
        cursor = self.cursor()
        found: list[tuple[bytes, bytes]] = []
        if not cursor.set_range(prefix if start is None else start):
            return found
        key: bytes
        if not values:
            for key in cursor.iternext(keys=True, values=False):
                if not key.startswith(prefix):
                    break
                found.append((key, b""))
            return found
        data: bytes
        for key, data in cursor:
            if not key.startswith(prefix):
                break
            found.append((key, data))
        return found

    def any_under(self, prefix: bytes) -> bool:
        """Whether some key starts with ``prefix``: one seek."""
        cursor = self.cursor()
        return bool(cursor.set_range(prefix)) and bytes(cursor.key()).startswith(prefix)

    def framed_context(self, state: str, storage_key: bytes, data: bytes, offset: int) -> bytes:
        """The context framed at ``offset`` of a long entry's data; CorruptStateError if cut."""
        try:
            return _unframe(data, offset)[0]
        except ValueError as error:
            raise _damaged(state, storage_key, f"has a damaged key header ({error})") from None

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

    def overlaid(self, state: LmdbValueState) -> None:
        """Called by a value state on its first pending write since the last durable commit."""
        self._overlaid.append(state)
        self._dirty = True

    def _write(self) -> None:
        """Write the value states' pending writes into the open write transaction, commit it
        and begin the next (no-op if nothing changed)."""
        if not self._dirty:
            return
        self._cursor = None
        try:
            overlaid, self._overlaid = self._overlaid, []
            for state in overlaid:
                state.flush()
            self.txn.commit()
        except lmdb.Error as error:
            failure = self.classify(error)
            assert failure is not None
            self._cursor = None
            self.txn.abort()  # a no-op if the commit ended it
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

    def _open_failure(self, error: lmdb.Error, what: str) -> StateError:
        """An LMDB error while creating or opening: a full disk or a device error classified
        (StorageFullError, StorageError); anything else is state that cannot be used."""
        if isinstance(error, lmdb.DiskError) or "No space left" in str(error):
            failure = self.classify(error)
            assert failure is not None
            return failure
        return CorruptStateError(f"{what}: {error}")

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
        for state in self._overlaid:
            state.discard()
        self._overlaid = []
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
        for state in self._overlaid:
            state.discard()
        self._overlaid = []
        try:
            self.txn.abort()
            self.env.sync(True)
        except lmdb.Error as error:  # a failed sync loses nothing a process kill would keep
            failure = self.classify(error)
            assert failure is not None
            raise failure from error
        finally:
            try:
                self.env.close()
            finally:
                self._dir.close()


_DELETED: Any = object()  # overlay mark of a pending deletion (LmdbValueState)
_MISSING: Any = object()


def _digest(data: bytes) -> bytes:
    """SHA-256 of ``data``: the fixed-size stand-in of a context or user key too long for a key."""
    return hashlib.sha256(data).digest()


def _frame(data: bytes) -> bytes:
    """``len32(data) + data``: how a long key is kept, unambiguously, at the head of its value."""
    return _LEN32.pack(len(data)) + data


def _unframe(data: bytes, offset: int) -> tuple[bytes, int]:
    """The framed bytes at ``offset`` of ``data`` and the offset just past them; ValueError if cut."""
    if len(data) < offset + 4:
        raise ValueError("truncated length")
    end = offset + 4 + _LEN32.unpack_from(data, offset)[0]
    if end > len(data):
        raise ValueError("truncated key")
    return data[offset + 4 : end], end


def _damaged(state: str, key: bytes, problem: str) -> CorruptStateError:
    return CorruptStateError(f"damaged state: state {state!r}: the entry under key {key!r} {problem}")


def _collision(state: str, key: bytes) -> CorruptStateError:
    return CorruptStateError(
        f"state {state!r}: the entry under key {key!r} belongs to another context or user key with the "
        "same SHA-256 digest (a digest collision) or is damaged; refusing to mix them up"
    )


@mypyc_attr(allow_interpreted_subclasses=True)
class LmdbValueState:
    """``ValueState``: storage key = state prefix + context. One LMDB get/put per call.

    A context too long for that key is stored under ``b"V"`` + name + SHA-256(context), the
    framed context at the head of the value (checked on every access).

    Keys that fit take the hot path: the backend's put/delete (journal record, dirty flag)
    inline, the open transaction's methods called directly, msgpack decoding in
    :func:`_decoded` (a native call when compiled) — no Python-level call besides the state
    method itself. (The transaction is
    read from the backend at every access, not bound once per transaction: binding costs
    more at every durable commit than it saves per access with a commit per input.)

    **Overlay.** While units are deferred (a commit interval > 1, or held commits: the
    backend's journal is on), puts and deletes of keys that fit stay in ``_pending`` (context
    -> value, or a deletion mark) until the durable commit writes them into the transaction,
    as RocksDB's overlay does. Without it every input of LEGACY or VALUE packed its key's
    whole history (~270 KB at 1,000 rows of 250 bytes), copied it into LMDB's pages and
    unpacked it again at the next input's read, where RocksDB's overlay hands the Python value
    back: measured at history 1,000, interval 1,000, compiled, 2.3-2.6 ops/ms against RocksDB's
    13.6 (LEGACY) and 85 (VALUE); with the overlay 11.9 and 85.7. A key rewritten by N inputs of
    a batch is packed and written once. Reads consult the overlay first (a list value is handed out as a
    shallow copy, as heap state hands it out); each overlay write journals the entry it
    replaces, so a rollback undoes the failed unit only. With interval 1 the overlay stays
    empty: one dict test per access.
    """

    def __init__(self, backend: LmdbBackend, name: str) -> None:
        self._backend = backend
        self.name = name
        self._prefix = state_prefix(b"v", name)
        self._long_prefix = LONG_VALUE_KIND + self._prefix[1:]
        self._limit = backend.max_key_size
        self._pack = backend.codec.pack
        self._unpack = backend.codec.unpack
        self._pending: dict[bytes, Any] = {}  # the overlay (class docstring)

    def get(self, context: bytes) -> Value | None:
        """The overlay, else one B-tree lookup in the open transaction."""
        key = self._prefix + context
        if len(key) > self._limit:
            return self._get_long(context)
        pending = self._pending
        if pending:
            value = pending.get(context, _MISSING)
            if value is not _MISSING:
                if value is _DELETED:
                    return None
                return value.copy() if type(value) is list else value
        data = self._backend.txn.get(key)
        if data is None:
            return None
        return _decoded(data, self._unpack, self.name, context)

    def _get_long(self, context: bytes) -> Value | None:
        key = self._long_prefix + _digest(context)
        data = self._backend.txn.get(key)
        return None if data is None else self._open(key, data, _frame(context))

    def _open(self, key: bytes, data: bytes, header: bytes) -> Value:
        """The value of a long entry whose data must start with ``header``."""
        if not data.startswith(header):
            raise _collision(self.name, key)
        return self._unpack(data[len(header) :], self.name, key)

    def get_many(self, contexts: Sequence[bytes]) -> list[Value | None]:
        """``[get(c) for c in contexts]``: ordered lookups in the one open transaction (async
        state), sorted by storage key so neighbouring lookups share B-tree pages."""
        txn_get, prefix, unpack, name = self._backend.txn.get, self._prefix, self._unpack, self.name
        limit = self._limit
        found: list[Value | None] = [None] * len(contexts)
        for position in sorted(range(len(contexts)), key=contexts.__getitem__):
            context = contexts[position]
            key = prefix + context
            if len(key) > limit:
                found[position] = self._get_long(context)
                continue
            if self._pending and context in self._pending:
                found[position] = self.get(context)
                continue
            data = txn_get(key)
            if data is not None:
                found[position] = unpack(data, name, context)
        return found

    def put(self, context: bytes, value: Value) -> None:
        """One B-tree insert in the open transaction."""
        key = self._prefix + context
        backend = self._backend
        if len(key) > self._limit:
            header = _frame(context)
            backend.replace_long(self.name, self._long_prefix + _digest(context), header, self._pack(value))
            return
        if backend.journal is not None or self._pending:  # units deferred: the overlay
            self._defer(context, value)
            return
        try:  # LmdbBackend.put, inline
            backend.txn.put(key, self._pack(value))
        except (lmdb.BadValsizeError, lmdb.MapFullError) as error:
            raise backend.put_error(error, key) from None
        backend._dirty = True

    def delete(self, context: bytes) -> None:
        """One B-tree delete in the open transaction."""
        key = self._prefix + context
        backend = self._backend
        if len(key) > self._limit:
            backend.pop_long(self.name, self._long_prefix + _digest(context), _frame(context))
            return
        if backend.journal is not None or self._pending:  # units deferred: the overlay
            self._defer(context, _DELETED)
            return
        if backend.txn.delete(key):  # LmdbBackend.delete, inline
            backend._dirty = True

    def _defer(self, context: bytes, value: Any) -> None:
        """A put (or, with the deletion mark, a delete) into the overlay, journaled."""
        pending = self._pending
        journal = self._backend.journal
        if not pending:
            self._backend.overlaid(self)
        if journal is not None:
            journal.append((self, context, None, pending.get(context, ABSENT)))
        pending[context] = value

    def undo(self, context: bytes, key: None, previous: Any) -> None:
        """Put back the overlay entry one journaled write replaced (rollback of a unit)."""
        if previous is ABSENT:
            self._pending.pop(context, None)
        else:
            self._pending[context] = previous

    def flush(self) -> None:
        """Write the overlay into the open transaction (the backend's durable commit)."""
        pending, self._pending = self._pending, {}
        txn, prefix, pack = self._backend.txn, self._prefix, self._pack
        for context, value in pending.items():
            key = prefix + context
            if value is _DELETED:
                txn.delete(key)
            else:
                txn.put(key, pack(value))

    def discard(self) -> None:
        """Forget the overlay (the transaction is aborted)."""
        self._pending = {}

    def contexts(self) -> Iterator[bytes]:
        """Every context with a value, in ascending byte order: prefix scans merged with the
        overlay (snapshot)."""
        found = [key[len(self._prefix) :] for key, _ in self._backend.scan(self._prefix, values=False)]
        long = [
            self._backend.framed_context(self.name, key, data, 0)
            for key, data in self._backend.scan(self._long_prefix)
        ]
        if self._pending:
            merged = set(found)
            for context, value in self._pending.items():
                if value is _DELETED:
                    merged.discard(context)
                else:
                    merged.add(context)
            found = list(merged)
            return iter(sorted(found + long))
        return iter(sorted(found + long) if long else found)


@mypyc_attr(allow_interpreted_subclasses=True)
class LmdbMapState:
    """``MapState`` (and, with the seeks of the subclass, ``SortedMapState``).

    Storage key = context prefix (state prefix + len32(context) + context) + user key: one
    LMDB get/put/delete per point call. An entry whose storage key would exceed LMDB's limit
    goes under state prefix + ``LONG_ENTRY`` + SHA-256(context) + SHA-256(user key), with the
    framed context and user key at the head of its value (checked on every access); ``items``
    and ``clear`` scan that range too once the state holds such an entry.

    The context prefix of the last context is cached (``_last_context``, ``_last_prefix``,
    and ``_last_header``: the framed context when the sorted subclass keys that context by a
    digest, else None). ``get``/``put``/``delete`` take the hot path for a plain key like the
    value state's: prefix cache, decoding and the backend's put/delete inline; anything else
    goes to ``_read_long``/``_put_long``/``_delete_long``.
    """

    _kind = b"m"
    _hashes_user_keys = True

    def __init__(self, backend: LmdbBackend, name: str) -> None:
        self._backend = backend
        self.name = name
        self._prefix = state_prefix(self._kind, name)
        self._limit = backend.max_key_size
        self._pack = backend.codec.pack
        self._unpack = backend.codec.unpack
        self._last_context: bytes | None = None
        self._last_prefix = b""
        self._last_header: bytes | None = None  # None: the last context's keys are plain
        self._long_entries = self._prefix + LONG_ENTRY
        # May the state hold an entry under a digest? (one seek now; set by every such put)
        self._has_long = self._hashes_user_keys and backend.any_under(self._long_entries)

    def _context_prefix(self, context: bytes) -> bytes:
        if context != self._last_context:
            self._last_prefix = context_prefix(self._prefix, context)
            self._last_context = context
        return self._last_prefix

    def _long_key(self, context: bytes, key: bytes) -> tuple[bytes, bytes]:
        """(storage key, value header) of an entry too long for a plain key."""
        return self._long_entries + _digest(context) + _digest(key), _frame(context) + _frame(key)

    def get(self, context: bytes, key: bytes) -> Value | None:
        """One B-tree lookup."""
        if context == self._last_context:
            storage_key = self._last_prefix + key
        else:
            storage_key = self._context_prefix(context) + key
        if len(storage_key) > self._limit or self._last_header is not None:
            return self._read_long(context, key, storage_key)
        data = self._backend.txn.get(storage_key)
        if data is None:
            return None
        return _decoded(data, self._unpack, self.name, storage_key)

    def _read_long(self, context: bytes, key: bytes, storage_key: bytes) -> Value | None:
        """``get`` of an entry whose plain ``storage_key`` is too long: under digests."""
        storage_key, header = self._long_key(context, key)
        data = self._backend.txn.get(storage_key)
        if data is None:
            return None
        if not data.startswith(header):
            raise _collision(self.name, storage_key)
        return self._unpack(data[len(header) :], self.name, storage_key)

    def get_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Value | None]:
        """``[get(c, k) for c, k in pairs]``: ordered lookups in the one open transaction
        (async state), sorted by storage key so neighbouring lookups share B-tree pages."""
        storage_keys = [context_prefix(self._prefix, context) + key for context, key in pairs]
        txn_get, unpack, name, limit = self._backend.txn.get, self._unpack, self.name, self._limit
        found: list[Value | None] = [None] * len(pairs)
        for position in sorted(range(len(pairs)), key=storage_keys.__getitem__):
            storage_key = storage_keys[position]
            if len(storage_key) > limit:
                found[position] = self._read_long(*pairs[position], storage_key)
                continue
            data = txn_get(storage_key)
            if data is not None:
                found[position] = unpack(data, name, storage_key)
        return found

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        """One B-tree insert."""
        if context == self._last_context:
            storage_key = self._last_prefix + key
        else:
            storage_key = self._context_prefix(context) + key
        if len(storage_key) > self._limit or self._last_header is not None:
            self._put_long(context, key, storage_key, value)
            return
        backend = self._backend
        journal = backend.journal  # LmdbBackend.put, inline
        try:
            if journal is None:
                backend.txn.put(storage_key, self._pack(value))
            else:
                journal.append(
                    (backend, storage_key, None, backend.txn.replace(storage_key, self._pack(value)))
                )
        except (lmdb.BadValsizeError, lmdb.MapFullError) as error:
            raise backend.put_error(error, storage_key) from None
        backend._dirty = True

    def _put_long(self, context: bytes, key: bytes, storage_key: bytes, value: Value) -> None:
        """``put`` of an entry whose plain ``storage_key`` is too long: under digests."""
        long_key, header = self._long_key(context, key)
        self._has_long = True
        self._backend.replace_long(self.name, long_key, header, self._pack(value))

    def delete(self, context: bytes, key: bytes) -> None:
        """One B-tree delete."""
        if context == self._last_context:
            storage_key = self._last_prefix + key
        else:
            storage_key = self._context_prefix(context) + key
        if len(storage_key) > self._limit or self._last_header is not None:
            self._delete_long(context, key, storage_key)
            return
        backend = self._backend
        journal = backend.journal  # LmdbBackend.delete, inline
        if journal is None:
            if backend.txn.delete(storage_key):
                backend._dirty = True
        else:
            previous = backend.txn.pop(storage_key)
            if previous is not None:
                journal.append((backend, storage_key, None, previous))
                backend._dirty = True

    def _delete_long(self, context: bytes, key: bytes, storage_key: bytes) -> None:
        """``delete`` of an entry whose plain ``storage_key`` is too long: under digests."""
        self._backend.pop_long(self.name, *self._long_key(context, key))

    def _plain_items(self, context: bytes) -> list[tuple[bytes, bytes]]:
        """(storage key, data) of the entries of ``context`` under plain keys."""
        prefix = self._context_prefix(context)
        return self._backend.scan(prefix) if len(prefix) <= self._limit else []

    def _long_items(self, context: bytes) -> list[tuple[bytes, bytes, int]]:
        """(storage key, data, offset of the value) of ``context``'s entries under digests,
        each checked to be ``context``'s."""
        if not self._has_long:
            return []
        header = _frame(context)
        found = []
        for storage_key, data in self._backend.scan(self._long_entries + _digest(context)):
            if not data.startswith(header):
                raise _collision(self.name, storage_key)
            try:
                _, offset = _unframe(data, len(header))
            except ValueError as error:
                raise _damaged(self.name, storage_key, f"has a damaged key header ({error})") from None
            found.append((storage_key, data, offset))
        return found

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        """Every entry: one range scan (snapshot), two once the state holds long entries."""
        start = len(self._context_prefix(context))
        unpack, name = self._unpack, self.name
        found = [(key[start:], unpack(data, name, key)) for key, data in self._plain_items(context)]
        for storage_key, data, offset in self._long_items(context):
            user_key = data[len(context) + 8 : offset]
            found.append((user_key, unpack(data[offset:], name, storage_key)))
        return iter(found)

    def clear(self, context: bytes) -> None:
        """Delete every entry of ``context``: range scans and one delete per entry."""
        doomed = [key for key, _, _ in self._long_items(context)]
        doomed += [key for key, _ in self._plain_items(context)]
        for storage_key in doomed:
            self._backend.delete(storage_key)

    def contexts(self) -> Iterator[bytes]:
        """Contexts with an entry, ordered by (length, bytes) like their plain keys: one seek
        per context under plain keys, then a scan of the entries under digests (snapshot)."""
        found: list[bytes] = []
        cursor = self._backend.cursor()
        prefix = self._prefix
        digests = prefix + LONG_ENTRY  # LONG_ENTRY and LONG_CONTEXT sort after every real length
        positioned = cursor.set_range(prefix)
        while positioned:
            storage_key: bytes = cursor.key()
            if not storage_key.startswith(prefix) or storage_key >= digests:
                break
            context, _ = split_context(prefix, storage_key)
            found.append(context)
            following = successor(context_prefix(prefix, context))
            positioned = following is not None and cursor.set_range(following)
        long = {
            self._backend.framed_context(self.name, key, data, 0)
            for key, data in self._backend.scan(prefix, start=digests)
        }
        if not long:
            return iter(found)
        return iter(sorted(long.union(found), key=lambda context: (len(context), context)))


@mypyc_attr(allow_interpreted_subclasses=True)
class LmdbSortedMapState(LmdbMapState):
    """``SortedMapState``: cursor seeks in the open transaction.

    A context too long to leave room for an 8-byte user key (a sequence number) is replaced,
    for all of its entries, by ``LONG_CONTEXT`` + SHA-256(context) — fixed size, so its entries
    still form one range ordered by user key — with the framed context at the head of each
    value (checked on every access). A user key that does not fit beside the context is
    refused (ValueError): sorted maps hold no digests of user keys, which would lose the order.

    The prefix cache also keeps the successor of the context prefix (``_last_following``, the
    bound of ``last``), and the seeks read the entry under the cursor inline (``item``, then
    the prefix test and decoding), so ``last`` is one Python call on a cache hit.
    """

    _kind = b"s"
    _hashes_user_keys = False

    def __init__(self, backend: LmdbBackend, name: str) -> None:
        super().__init__(backend, name)
        self._last_following: bytes | None = None

    def _context_prefix(self, context: bytes) -> bytes:
        if context != self._last_context:
            if len(self._prefix) + 4 + len(context) + SEQ_SIZE > self._limit:
                self._last_prefix = self._prefix + LONG_CONTEXT + _digest(context)
                self._last_header = _frame(context)
            else:
                self._last_prefix = context_prefix(self._prefix, context)
                self._last_header = None
            self._last_following = successor(self._last_prefix)
            self._last_context = context
        return self._last_prefix

    def _value(self, storage_key: bytes, data: bytes) -> Value:
        """The value of an entry of the last context (checked to be its own if long)."""
        header = self._last_header
        if header is None:
            return self._unpack(data, self.name, storage_key)
        if not data.startswith(header):
            raise _collision(self.name, storage_key)
        return self._unpack(data[len(header) :], self.name, storage_key)

    def _too_long(self, key: bytes) -> ValueError:
        room = self._limit - len(self._last_prefix)
        return ValueError(
            f"LMDB keys are limited to {self._limit} bytes: sorted map state {self.name!r} cannot "
            f"hold a {len(key)}-byte user key under this {len(self._last_context or b'')}-byte "
            f"context (at most {room} bytes fit; the rocksdb and heap backends have no such limit)"
        )

    def _read_long(self, context: bytes, key: bytes, storage_key: bytes) -> Value | None:
        """``get`` under a digest-keyed context (checked), or of a key too long (never stored)."""
        if len(storage_key) > self._limit:
            return None
        data = self._backend.txn.get(storage_key)
        return None if data is None else self._value(storage_key, data)

    def get_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Value | None]:
        """``[get(c, k) for c, k in pairs]``, sorted by storage key like the map state's."""
        keyed = [(self._context_prefix(context) + key, self._last_header) for context, key in pairs]
        txn_get, unpack, name, limit = self._backend.txn.get, self._unpack, self.name, self._limit
        found: list[Value | None] = [None] * len(pairs)
        for position in sorted(range(len(pairs)), key=lambda index: keyed[index][0]):
            storage_key, header = keyed[position]
            data = None if len(storage_key) > limit else txn_get(storage_key)
            if data is None:
                continue
            if header is None:
                found[position] = unpack(data, name, storage_key)
            elif data.startswith(header):
                found[position] = unpack(data[len(header) :], name, storage_key)
            else:
                raise _collision(name, storage_key)
        return found

    def _put_long(self, context: bytes, key: bytes, storage_key: bytes, value: Value) -> None:
        """``put`` under a digest-keyed context (the framed context heads the value), or a
        ValueError for a user key that does not fit."""
        header = self._last_header
        if len(storage_key) > self._limit or header is None:
            raise self._too_long(key)
        self._backend.replace_long(self.name, storage_key, header, self._pack(value))

    def _delete_long(self, context: bytes, key: bytes, storage_key: bytes) -> None:
        """``delete`` under a digest-keyed context (checked), or of a key too long (a no-op)."""
        header = self._last_header
        if len(storage_key) <= self._limit and header is not None:
            self._backend.pop_long(self.name, storage_key, header)

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        """Entries in ascending user-key order: one range scan (snapshot)."""
        prefix = self._context_prefix(context)
        start = len(prefix)
        return iter([(key[start:], self._value(key, data)) for key, data in self._backend.scan(prefix)])

    def clear(self, context: bytes) -> None:
        """Delete every entry of ``context``: a range scan and one delete per entry."""
        prefix = self._context_prefix(context)
        header = self._last_header
        doomed = self._backend.scan(prefix, values=header is not None)
        if header is not None and any(not data.startswith(header) for _, data in doomed):
            raise _collision(self.name, prefix)
        for storage_key, _ in doomed:
            self._backend.delete(storage_key)

    def _entry(self, prefix: bytes, storage_key: bytes, data: bytes) -> tuple[bytes, Value] | None:
        """The tail of every seek: the entry under the cursor if it belongs to ``prefix`` (the
        last context's), as (user key, decoded value), else None."""
        if not storage_key.startswith(prefix):
            return None
        if self._last_header is not None:
            return storage_key[len(prefix) :], self._value(storage_key, data)
        return storage_key[len(prefix) :], _decoded(data, self._unpack, self.name, storage_key)

    def _seek_cursor(self, context: bytes) -> tuple[bytes, lmdb.Cursor[bytes]]:
        """``context``'s storage prefix (cached for the last context) and the transaction's cursor."""
        prefix = self._last_prefix if context == self._last_context else self._context_prefix(context)
        cursor = self._backend._cursor
        if cursor is None:
            cursor = self._backend.cursor()
        return prefix, cursor

    def _at_or_above(self, cursor: lmdb.Cursor[bytes], bound: bytes) -> bool:
        """Put ``cursor`` on the smallest storage key at or above ``bound``; False if none. One
        seek (and a step when ``bound`` is longer than LMDB's key limit)."""
        if len(bound) <= self._limit:
            return cursor.set_range(bound)
        # Every stored key is at most the limit long, so the smallest at or above ``bound`` is the
        # smallest above its head: a stored key equal to the head sorts below ``bound``.
        head = bound[: self._limit]
        if not cursor.set_range(head):
            return False
        return cursor.next() if cursor.key() == head else True

    def _below(self, cursor: lmdb.Cursor[bytes], bound: bytes | None) -> bool:
        """Put ``cursor`` on the greatest storage key below ``bound`` (None: the greatest of all);
        False if none. One seek and one step back."""
        if bound is not None and self._at_or_above(cursor, bound):
            return cursor.prev()
        return cursor.last()

    def last(self, context: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry: one seek and one step back."""
        prefix, cursor = self._seek_cursor(context)  # sets ``_last_following`` for ``context``
        if not self._below(cursor, self._last_following):
            return None
        storage_key, data = cursor.item()
        return self._entry(prefix, storage_key, data)

    def first(self, context: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry: one seek."""
        prefix, cursor = self._seek_cursor(context)
        if not cursor.set_range(prefix):
            return None
        storage_key, data = cursor.item()
        return self._entry(prefix, storage_key, data)

    def ceiling(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry at or above ``key``: one seek."""
        prefix, cursor = self._seek_cursor(context)
        if not self._at_or_above(cursor, prefix + key):
            return None
        storage_key, data = cursor.item()
        return self._entry(prefix, storage_key, data)

    def before(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry below ``key``: one seek and one step back."""
        prefix, cursor = self._seek_cursor(context)
        if not self._below(cursor, prefix + key):
            return None
        storage_key, data = cursor.item()
        return self._entry(prefix, storage_key, data)
