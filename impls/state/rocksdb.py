"""RocksDB keyed state (rocksdict, real RocksDB), one atomic ``WriteBatch`` per commit.

Writes between commits live in an *overlay* (per state: storage key or context prefix ->
value, or a deletion mark) consulted before the database, so reads see uncommitted writes;
``commit`` encodes the overlay into one ``WriteBatch`` and writes it atomically. The database
is only written at commits, so one RocksDB iterator (an implicit snapshot) serves every seek
between two commits.

Ordered seeks merge the overlay with the database: the best pending put of the context is
found by bisection in a sorted list of its pending keys, and the database is walked from the
seek position up to that entry, skipping the keys the overlay has touched (deleted or
rewritten). Cost: one seek, O(log pending), plus one step per overlay-touched database key
between the seek position and the best pending put, never past that put
(:class:`RocksSortedMapState`).

Durability: the write-ahead log is on and not synced per batch (``sync=False``). Once
``commit`` returns, the batch is in the WAL in the OS page cache: a killed process (even
SIGKILL) loses nothing committed and never sees half a batch; an OS crash or power loss may
lose the last commits (never tear one). ``close`` flushes the WAL to disk.

Storage key layout: see codec.py. Values: msgpack (codec.py), never pickle.
"""

from __future__ import annotations

import contextlib
from bisect import bisect_left, insort
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from mypy_extensions import mypyc_attr
from rocksdict import (
    BlockBasedOptions,
    Cache,
    Options,
    Rdict,
    RdictIter,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from .base import Value
from .codec import META_PREFIX, ValueCodec, context_prefix, split_context, state_prefix, successor
from .deferred import ABSENT, DeferredCommits
from .directory import StateDirectory
from .errors import CorruptStateError, StateError, StorageError, StorageFullError
from .named import NamedStates

FORMAT_KEY = META_PREFIX + b"format"
FORMAT = b"upsertmat-rocksdb/1"

_DELETED: Any = object()  # overlay mark of a pending deletion
_MISSING: Any = object()
_ABSENT = ABSENT  # undo record: the overlay had no entry there


def _options(create: bool) -> Options:
    options = Options(raw_mode=True)
    options.create_if_missing(create)
    options.set_paranoid_checks(True)
    # Tuned for point gets of small values: bloom filters skip files, a row cache answers hot
    # keys without touching blocks (measured: ~0.6 us per cached get instead of ~2 us).
    table = BlockBasedOptions()
    table.set_block_cache(Cache(32 << 20))
    table.set_bloom_filter(10, False)
    options.set_block_based_table_factory(table)
    options.set_row_cache(Cache(32 << 20))
    options.set_write_buffer_size(64 << 20)
    options.set_max_background_jobs(2)
    options.set_keep_log_file_num(2)
    return options


@mypyc_attr(allow_interpreted_subclasses=True)
class RocksdbBackend(DeferredCommits):
    """The states of one operator instance in one RocksDB database.

    ``path``: the backend directory (locked while open; see directory.py), or None for a
    temporary database removed on close. Raises StateLockedError if another backend holds
    ``path``, CorruptStateError if ``path`` is not a valid state directory.

    Commits: ``commit()`` ends a unit (an input); with ``commit_interval`` N > 1 (or while
    ``defer_commits`` holds them) the overlay keeps N units and one WriteBatch writes them,
    and each overlay write is journaled so ``rollback`` undoes only the failed unit
    (:mod:`.deferred`).
    """

    name = "rocksdb"
    supports_ordered = True

    def __init__(self, path: Path | None = None) -> None:
        self._dir = StateDirectory(path, "rocksdb")
        try:
            self._dir.prepare(self._create)
            self.db = self._open(self._dir.db)
        except BaseException:
            self._dir.close()
            raise
        self.path = self._dir.root
        self.codec = ValueCodec()
        self._write_options = WriteOptions()
        self._states = NamedStates(lambda kind, name: kind(self, name))
        self._dirty: list[RocksValueState | RocksMapState] = []
        self._iterator: RdictIter | None = None
        self._closed = False

    def _create(self, directory: Path) -> None:
        """A new database in ``directory`` holding the format marker; a full disk (any RocksDB
        error) classified."""
        try:
            db = Rdict(str(directory), options=_options(create=True))
            try:
                db.put(FORMAT_KEY, FORMAT)
            finally:
                db.close()
        except Exception as error:
            raise self._failure(error, f"cannot create the RocksDB state at {directory}") from error

    def _open(self, directory: Path) -> Rdict:
        """The database in ``directory``, checked to be ours (its format marker). Opening
        replays the write-ahead log and may write; a damaged file found then (a block whose
        checksum does not match) is a CorruptStateError, a full disk a StorageFullError."""
        try:
            db = Rdict(str(directory), options=_options(create=False))
        except Exception as error:
            raise self._failure(error, f"cannot open the RocksDB state at {directory}") from error
        try:
            marker = db.get(FORMAT_KEY)
        except Exception as error:
            with contextlib.suppress(Exception):
                db.close()
            raise self._failure(error, f"cannot read the RocksDB state at {directory}") from error
        if marker != FORMAT:
            db.close()
            raise CorruptStateError(
                f"{directory} is not an upsertmat RocksDB state "
                f"(format marker {marker!r}, expected {FORMAT!r})"
            )
        return db

    def _failure(self, error: Exception, what: str) -> StateError:
        """``error`` of RocksDB while opening: classified (:meth:`classify`), anything else
        unreadable state (CorruptStateError)."""
        return self.classify(error) or CorruptStateError(f"{what}: {' '.join(str(error).split())}")

    def iterator(self) -> RdictIter:
        """A database iterator valid until the next commit (the database changes only then).

        An iterator that is not ``valid()`` may have stopped on an error (a block whose
        checksum does not match) rather than at the end: callers call :meth:`ended` then."""
        if self._iterator is None:
            self._iterator = self.db.iter(ReadOptions())
        return self._iterator

    def ended(self, iterator: RdictIter) -> None:
        """``iterator`` is no longer valid: raise its error if it stopped on one (classified:
        a damaged block is a CorruptStateError), so a scan never ends early in silence."""
        try:
            iterator.status()
        except Exception as error:
            raise (self.classify(error) or error) from error

    def mark_dirty(self, state: RocksValueState | RocksMapState) -> None:
        """Called by a state on its first write since the last commit (or an undo that emptied
        its overlay: then it is listed already)."""
        if state not in self._dirty:
            self._dirty.append(state)

    def handed_out(self, value: Value) -> Value:
        """An overlay value as a reader gets it: while units are journaled, a list as a shallow
        copy (as the heap backend hands it out), so a strategy changing a node in place before
        putting it again cannot change the value an undo record holds."""
        return value.copy() if self.journal is not None and type(value) is list else value

    def value_state(self, name: str) -> RocksValueState:
        """The value state ``name``."""
        return self._states.get(name, RocksValueState)

    def map_state(self, name: str) -> RocksMapState:
        """The map state ``name`` (ordered, like every RocksDB map)."""
        return self._states.get(name, RocksMapState)

    def sorted_map_state(self, name: str) -> RocksSortedMapState:
        """The sorted map state ``name``."""
        return self._states.get(name, RocksSortedMapState)

    def _write(self) -> None:
        """Write every pending change in one atomic WriteBatch (no-op if there is none)."""
        if not self._dirty:
            return
        batch = WriteBatch(raw_mode=True)
        for state in self._dirty:
            state.flush(batch)
        self._dirty = []
        self.durable_commits += 1
        try:
            self.db.write(batch, self._write_options)
        except Exception as error:
            failure = self.classify(error)
            if failure is None:
                raise
            raise failure from error
        self._iterator = None

    def classify(self, error: Exception) -> StateError | None:
        """A RocksDB status error as a StateError naming the database; None for anything else.

        rocksdict raises plain exceptions whose text starts with RocksDB's status: ``IO error``
        (``No space left on device`` among them), ``Corruption``, ... The text may span lines
        (``... The file MANIFEST-000013 may be corrupted.``): it is said on one. A file the
        database lists that is missing (``CURRENT`` naming a deleted MANIFEST, a deleted table)
        is damage, not an I/O failure that freeing space would cure.
        """
        text = " ".join(str(error).split())
        where = f"the RocksDB state at {self._dir.db}"
        if text.startswith("Corruption"):
            return CorruptStateError(f"damaged state: {where} cannot be read: {text}")
        if text.startswith("IO error: No such file or directory"):
            return CorruptStateError(
                f"damaged state: {where} cannot be read: a file it lists is missing ({text})"
            )
        if "No space left" in text or (text.startswith("IO error") and "Writer has previous error" in text):
            return StorageFullError(f"{where} cannot be written: {text}")
        # RocksDB's own I/O status, or an error of the file system rocksdict met itself
        # ("Input/output error (os error 5)").
        if text.startswith("IO error") or "(os error " in text:
            return StorageError(f"{where} failed: {text}")
        return None

    def _discard(self) -> None:
        """Drop every write since the last commit (the overlay); O(pending writes)."""
        for state in self._dirty:
            state.discard()
        self._dirty = []

    def close(self) -> None:
        """Drop uncommitted writes, flush the WAL, close the database and release the lock."""
        if self._closed:
            return
        self._closed = True
        self._iterator = None
        self._dirty = []
        try:
            self.db.flush_wal(True)
        except Exception as error:  # a failed write poisoned the WAL: what was committed is safe
            failure = self.classify(error)
            if failure is None:
                raise
            with contextlib.suppress(Exception):
                self.db.close()
            self._dir.close()
            raise failure from error
        try:
            self.db.close()
        except Exception as error:  # closing flushes; a full disk now loses nothing committed
            failure = self.classify(error)
            if failure is None:
                raise
            raise failure from error
        finally:
            self._dir.close()


def _multi_get(db: Rdict, storage_keys: list[bytes]) -> list[bytes | None]:
    """RocksDB ``multi_get``: the raw values of ``storage_keys`` (None where absent), one call."""
    keys: Any = storage_keys  # rocksdict's stubs want list[str | int | ... | bytes]
    found: list[bytes | None] = db.get(keys) or []
    return found


@mypyc_attr(allow_interpreted_subclasses=True)
class RocksValueState:
    """``ValueState``: storage key = state prefix + context. O(1) overlay work per call."""

    def __init__(self, backend: RocksdbBackend, name: str) -> None:
        self._backend = backend
        self.name = name
        self._prefix = state_prefix(b"v", name)
        self._db_get = backend.db.get
        self._pack = backend.codec.pack
        self._unpack = backend.codec.unpack
        self._pending: dict[bytes, Value] = {}

    def get(self, context: bytes) -> Value | None:
        """Overlay, then one RocksDB point get."""
        value = self._pending.get(context, _MISSING)
        if value is _MISSING:
            data = self._db_get(self._prefix + context)
            return None if data is None else self._unpack(data, self.name, context)
        if value is _DELETED:
            return None
        return value.copy() if type(value) is list and self._backend.journal is not None else value

    def put(self, context: bytes, value: Value) -> None:
        """Pending until commit."""
        pending = self._pending
        if not pending:
            self._backend.mark_dirty(self)
        journal = self._backend.journal
        if journal is not None:
            journal.append((self, context, None, pending.get(context, _ABSENT)))
        pending[context] = value

    def delete(self, context: bytes) -> None:
        """Pending until commit."""
        pending = self._pending
        if not pending:
            self._backend.mark_dirty(self)
        journal = self._backend.journal
        if journal is not None:
            journal.append((self, context, None, pending.get(context, _ABSENT)))
        pending[context] = _DELETED

    def undo(self, context: bytes, key: None, previous: Value) -> None:
        """Put back the overlay entry one journaled write replaced (rollback of a unit)."""
        if previous is _ABSENT:
            self._pending.pop(context, None)
        else:
            self._pending[context] = previous

    def contexts(self) -> Iterator[bytes]:
        """Every context with a value: a prefix scan merged with the overlay."""
        found = set()
        iterator = self._backend.iterator()
        iterator.seek(self._prefix)
        while iterator.valid():
            key = iterator.key()
            if not key.startswith(self._prefix):
                break
            found.add(key[len(self._prefix) :])
            iterator.next()
        else:
            self._backend.ended(iterator)
        for context, value in self._pending.items():
            if value is _DELETED:
                found.discard(context)
            else:
                found.add(context)
        return iter(sorted(found))

    def get_many(self, contexts: Sequence[bytes]) -> list[Value | None]:
        """``[get(c) for c in contexts]`` with the database reads issued together: the
        overlay first, then one RocksDB ``multi_get`` for the rest (async state)."""
        found: list[Value | None] = [None] * len(contexts)
        positions: list[int] = []
        storage_keys: list[bytes] = []
        for position, context in enumerate(contexts):
            value = self._pending.get(context, _MISSING)
            if value is _MISSING:
                positions.append(position)
                storage_keys.append(self._prefix + context)
            elif value is not _DELETED:
                found[position] = self._backend.handed_out(value)
        if storage_keys:
            unpack, name = self._unpack, self.name
            for position, data in zip(positions, _multi_get(self._backend.db, storage_keys), strict=True):
                if data is not None:
                    found[position] = unpack(data, name, contexts[position])
        return found

    def flush(self, batch: WriteBatch) -> None:
        """Move the overlay into ``batch``."""
        pack, prefix = self._pack, self._prefix
        for context, value in self._pending.items():
            if value is _DELETED:
                batch.delete(prefix + context)
            else:
                batch.put(prefix + context, pack(value))
        self._pending = {}

    def discard(self) -> None:
        """Forget the pending writes (rollback)."""
        self._pending = {}


@mypyc_attr(allow_interpreted_subclasses=True)
class RocksMapState:
    """``MapState`` (and, with the seeks of the subclass, ``SortedMapState``).

    Storage key = context prefix (state prefix + len32(context) + context) + user key. The
    overlay maps context prefix -> {user key: value or deletion mark}. Point calls: O(1)
    overlay work plus at most one RocksDB get.
    """

    _kind = b"m"

    def __init__(self, backend: RocksdbBackend, name: str) -> None:
        self._backend = backend
        self.name = name
        self._prefix = state_prefix(self._kind, name)
        self._db_get = backend.db.get
        self._pack = backend.codec.pack
        self._unpack = backend.codec.unpack
        self._pending: dict[bytes, dict[bytes, Value]] = {}
        self._last_context: bytes | None = None
        self._last_prefix = b""

    def _context_prefix(self, context: bytes) -> bytes:
        if context != self._last_context:
            self._last_prefix = context_prefix(self._prefix, context)
            self._last_context = context
        return self._last_prefix

    def _pending_of(self, prefix: bytes) -> dict[bytes, Value]:
        pending = self._pending.get(prefix)
        if pending is None:
            if not self._pending:
                self._backend.mark_dirty(self)
            pending = self._pending[prefix] = {}
        return pending

    def _decode(self, storage_key: bytes, data: bytes) -> Value:
        return self._unpack(data, self.name, storage_key)

    def get(self, context: bytes, key: bytes) -> Value | None:
        """Overlay, then one RocksDB point get."""
        # _context_prefix, inlined (the hot path)
        prefix = self._last_prefix if context == self._last_context else self._context_prefix(context)
        pending = self._pending.get(prefix)
        if pending is not None:
            value = pending.get(key, _MISSING)
            if value is not _MISSING:
                if value is _DELETED:
                    return None
                # handed_out(value), inlined: this is the hot path of every overlay hit
                return value.copy() if type(value) is list and self._backend.journal is not None else value
        storage_key = prefix + key
        data = self._db_get(storage_key)
        return None if data is None else self._unpack(data, self.name, storage_key)

    def get_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Value | None]:
        """``[get(c, k) for c, k in pairs]`` with the database reads issued together: the
        overlay first, then one RocksDB ``multi_get`` for the rest (async state)."""
        found: list[Value | None] = [None] * len(pairs)
        positions: list[int] = []
        storage_keys: list[bytes] = []
        for position, (context, key) in enumerate(pairs):
            prefix = self._context_prefix(context)
            pending = self._pending.get(prefix)
            value = _MISSING if pending is None else pending.get(key, _MISSING)
            if value is _MISSING:
                positions.append(position)
                storage_keys.append(prefix + key)
            elif value is not _DELETED:
                found[position] = self._backend.handed_out(value)
        if storage_keys:
            datas = _multi_get(self._backend.db, storage_keys)
            for position, storage_key, data in zip(positions, storage_keys, datas, strict=True):
                if data is not None:
                    found[position] = self._unpack(data, self.name, storage_key)
        return found

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        """Pending until commit. O(1)."""
        # _context_prefix and _pending_of, inlined (the hot path)
        prefix = self._last_prefix if context == self._last_context else self._context_prefix(context)
        pending = self._pending.get(prefix)
        if pending is None:
            pending = self._pending_of(prefix)
        journal = self._backend.journal
        if journal is not None:
            journal.append((self, prefix, key, pending.get(key, _ABSENT)))
        pending[key] = value

    def delete(self, context: bytes, key: bytes) -> None:
        """Pending until commit: a deletion mark (even if the key is absent), written as
        :meth:`put` writes a value. O(1); the sorted map's O(log pending)."""
        self.put(context, key, _DELETED)

    def undo(self, prefix: bytes, key: bytes, previous: Value) -> None:
        """Put back the overlay entry one journaled write replaced (rollback of a unit); an
        emptied context stays as an empty overlay dict (it reads as untouched)."""
        pending = self._pending.setdefault(prefix, {})
        if previous is _ABSENT:
            pending.pop(key, None)
        else:
            pending[key] = previous

    def _committed(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """(user key, raw value) of the database entries of one context prefix, ascending."""
        iterator = self._backend.iterator()
        iterator.seek(prefix)
        start = len(prefix)
        while iterator.valid():
            storage_key = iterator.key()
            if not storage_key.startswith(prefix):
                return
            yield storage_key[start:], iterator.value()
            iterator.next()
        self._backend.ended(iterator)

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        """Entries in ascending user-key order: a range scan merged with the overlay (snapshot)."""
        prefix = self._context_prefix(context)
        pending = self._pending.get(prefix) or {}
        merged = {
            key: self._decode(prefix + key, data)
            for key, data in self._committed(prefix)
            if key not in pending
        }
        merged.update(
            (key, self._backend.handed_out(value)) for key, value in pending.items() if value is not _DELETED
        )
        return iter(sorted(merged.items()))

    def clear(self, context: bytes) -> None:
        """Delete every entry of ``context``: O(entries) deletion marks."""
        for key in [key for key, _ in self.items(context)]:
            self.put(context, key, _DELETED)

    def contexts(self) -> Iterator[bytes]:
        """Contexts with an entry: one seek per committed context, merged with the overlay."""
        found: set[bytes] = set()
        iterator = self._backend.iterator()
        iterator.seek(self._prefix)
        while iterator.valid():
            storage_key = iterator.key()
            if not storage_key.startswith(self._prefix):
                break
            context, _ = split_context(self._prefix, storage_key)
            found.add(context)
            following = successor(context_prefix(self._prefix, context))
            if following is None:
                break
            iterator.seek(following)
        else:
            self._backend.ended(iterator)
        skip = len(self._prefix) + 4
        for prefix in self._pending:
            context = prefix[skip:]
            found.discard(context)
            if next(self.items(context), None) is not None:
                found.add(context)
        return iter(sorted(found))

    def flush(self, batch: WriteBatch) -> None:
        """Move the overlay into ``batch``."""
        pack = self._pack
        for prefix, pending in self._pending.items():
            for key, value in pending.items():
                if value is _DELETED:
                    batch.delete(prefix + key)
                else:
                    batch.put(prefix + key, pack(value))
        self._pending = {}
        self._last_context = None

    def discard(self) -> None:
        """Forget the pending writes (rollback)."""
        self._pending = {}
        self._last_context = None


@mypyc_attr(allow_interpreted_subclasses=True)
class RocksSortedMapState(RocksMapState):
    """``SortedMapState``: seeks on the RocksDB iterator merged with an *ordered* overlay.

    Besides the overlay, each context prefix with pending puts keeps their keys in a sorted list
    (``_puts``), so the best pending entry of a seek (the greatest put for ``last``, the least
    put at or above a key for ``ceiling``...) is one bisection, O(log pending), not a scan of
    the pending entries. The database is then walked from the seek position only up to that
    pending entry, as a database key beyond it cannot be the answer; a backward walk that meets
    a key the overlay touched continues *forward* from
    the pending entry up to that key (:meth:`_greatest_between`). (A ``prev`` past a key the
    overlay deleted makes RocksDB step through every tombstone below it, down to the next live
    key: with a commit interval of 1000, SORTED's reverse seeks cost 0.2 ms each at history 2
    before this, growing with the run.)

    What one seek looks at in the overlay (:attr:`seek_visits` counts it): the bisection, plus
    one entry per database key between the seek position and the best pending entry that the
    overlay rewrote or deleted. SORTED's seeks visit at most 2 whatever the commit interval
    (a retraction's ``last`` meets the deleted node itself at most;
    ``tests/state/test_rocksdb_seeks.py`` pins it); in general a seek also steps over the
    database keys of the context that the pending batch deleted above the answer (and, with no
    pending put in the context at all, a reverse seek steps back past them one by one):
    retracting random rows with a commit interval of 100 measured up to 17 such steps.
    """

    _kind = b"s"

    def __init__(self, backend: RocksdbBackend, name: str) -> None:
        super().__init__(backend, name)
        self._puts: dict[bytes, list[bytes]] = {}
        self.seek_visits = 0
        """Overlay entries looked at by seeks so far (a bisection counts one): for tests."""

    def _sorted_puts(self, prefix: bytes) -> list[bytes]:
        puts = self._puts.get(prefix)
        if puts is None:
            puts = self._puts[prefix] = []
        return puts

    def _note(self, prefix: bytes, key: bytes, previous: Value, value: Value) -> None:
        """Keep ``_puts`` of ``prefix`` in step with one overlay change of ``key``: O(log n)
        (O(1) amortised for an append above every pending put, SORTED's case)."""
        was_put = previous is not _ABSENT and previous is not _DELETED
        is_put = value is not _DELETED
        if was_put == is_put:
            return
        puts = self._sorted_puts(prefix)
        if is_put:
            if not puts or key > puts[-1]:
                puts.append(key)
            else:
                insort(puts, key)
        else:
            del puts[bisect_left(puts, key)]

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        """Pending until commit (a deletion mark too: ``delete``). O(log pending) (O(1)
        amortised for ascending keys)."""
        # _context_prefix and _pending_of, inlined (the hot path)
        prefix = self._last_prefix if context == self._last_context else self._context_prefix(context)
        pending = self._pending.get(prefix)
        if pending is None:
            pending = self._pending_of(prefix)
        previous = pending.get(key, _ABSENT)
        journal = self._backend.journal
        if journal is not None:
            journal.append((self, prefix, key, previous))
        pending[key] = value
        # A put over nothing, or a deletion mark (``delete``, ``clear``) over a put: _puts changes.
        if (previous is _ABSENT or previous is _DELETED) != (value is _DELETED):
            self._note(prefix, key, previous, value)

    def undo(self, prefix: bytes, key: bytes, previous: Value) -> None:
        """As ``RocksMapState.undo``, keeping ``_puts`` in step."""
        pending = self._pending.get(prefix)
        current = _ABSENT if pending is None else pending.get(key, _ABSENT)
        super().undo(prefix, key, previous)
        self._note(prefix, key, current, _DELETED if previous is _ABSENT else previous)

    def flush(self, batch: WriteBatch) -> None:
        """Move the overlay into ``batch``."""
        super().flush(batch)
        self._puts = {}

    def discard(self) -> None:
        """Forget the pending writes (rollback)."""
        super().discard()
        self._puts = {}

    def _walk(
        self,
        iterator: RdictIter,
        prefix: bytes,
        pending: dict[bytes, Value] | None,
        forward: bool,
        stop: bytes | None,
    ) -> tuple[bytes, bytes] | None:
        """From the iterator's position, the first entry of ``prefix`` the overlay has not
        touched, strictly before ``stop`` (a user key; None: the end of the context)."""
        start = len(prefix)
        while iterator.valid():
            storage_key = iterator.key()
            if not storage_key.startswith(prefix):
                return None
            key = storage_key[start:]
            if stop is not None and (key >= stop if forward else key <= stop):
                return None
            if pending is None or key not in pending:
                return key, iterator.value()
            self.seek_visits += 1
            if not forward and stop is not None:
                return self._greatest_between(iterator, prefix, pending, stop, key)
            if forward:
                iterator.next()
            else:
                iterator.prev()
        self._backend.ended(iterator)
        return None

    def _greatest_between(
        self, iterator: RdictIter, prefix: bytes, pending: dict[bytes, Value], low: bytes, high: bytes
    ) -> tuple[bytes, bytes] | None:
        """The greatest database entry strictly between ``low`` and ``high`` (user keys) the
        overlay has not touched. Walked *forward* from ``low``: a backward step from ``high``
        would make RocksDB pass every tombstone below it, down to the next live key however far
        below ``low`` that is; forward, only the keys between the two are passed."""
        start = len(prefix)
        best: tuple[bytes, bytes] | None = None
        iterator.seek(prefix + low)
        while iterator.valid():
            storage_key = iterator.key()
            key = storage_key[start:]
            if key >= high or not storage_key.startswith(prefix):
                break
            if key != low:
                if key in pending:
                    self.seek_visits += 1
                else:
                    best = key, iterator.value()
            iterator.next()
        return best

    def _best(
        self, prefix: bytes, found: tuple[bytes, bytes] | None, candidate: bytes | None
    ) -> tuple[bytes, Value] | None:
        """A database entry found before the pending ``candidate``, else the candidate."""
        if found is not None:
            return found[0], self._decode(prefix + found[0], found[1])
        if candidate is None:
            return None
        return candidate, self._backend.handed_out(self._pending[prefix][candidate])

    def _pending_near(
        self, prefix: bytes, key: bytes | None, below: bool
    ) -> tuple[dict[bytes, Value] | None, bytes | None]:
        """The overlay's pending writes under ``prefix`` (None: none) and the pending put a seek
        must weigh against the database: the smallest at or above ``key`` (``below`` False), the
        greatest below it (``below`` True; ``key`` None: the greatest of all). Counts a seek
        visit when writes are pending. O(log pending)."""
        pending = self._pending.get(prefix)
        if not pending:
            return pending, None
        self.seek_visits += 1
        puts = self._puts.get(prefix)
        if not puts:
            return pending, None
        if key is None:
            return pending, puts[-1]
        at = bisect_left(puts, key)
        if below:
            return pending, puts[at - 1] if at > 0 else None
        return pending, puts[at] if at < len(puts) else None

    @staticmethod
    def _seek_below(iterator: RdictIter, target: bytes) -> None:
        """Put ``iterator`` on the greatest key strictly below ``target``: one reverse seek."""
        iterator.seek_for_prev(target)
        if iterator.valid() and iterator.key() == target:
            iterator.prev()

    def last(self, context: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry: one reverse seek (module docstring: the ordered overlay)."""
        prefix = self._context_prefix(context)
        pending, candidate = self._pending_near(prefix, None, True)
        iterator = self._backend.iterator()
        end = successor(prefix)
        if end is None:  # pragma: no cover - a prefix starts with a kind letter, never 0xff
            iterator.seek_to_last()
        else:
            self._seek_below(iterator, end)
        found = self._walk(iterator, prefix, pending, False, candidate)
        return self._best(prefix, found, candidate)

    def first(self, context: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry: one seek (see :meth:`ceiling`)."""
        return self.ceiling(context, b"")

    def ceiling(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The smallest entry at or above ``key``: one seek (module docstring).

        Seeking past a run of deleted keys costs nothing here, whereas a seek from the start of
        the context would step over every tombstone RocksDB still holds for them.
        """
        prefix = self._context_prefix(context)
        pending, candidate = self._pending_near(prefix, key, False)
        iterator = self._backend.iterator()
        iterator.seek(prefix + key)
        found = self._walk(iterator, prefix, pending, True, candidate)
        return self._best(prefix, found, candidate)

    def before(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        """The greatest entry below ``key``: one reverse seek (module docstring)."""
        prefix = self._context_prefix(context)
        pending, candidate = self._pending_near(prefix, key, True)
        iterator = self._backend.iterator()
        self._seek_below(iterator, prefix + key)
        found = self._walk(iterator, prefix, pending, False, candidate)
        return self._best(prefix, found, candidate)
