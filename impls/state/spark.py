"""The ``spark`` backend: our keyed-state protocols on Spark's state store, batched per key.

Inside a ``transformWithState`` processor every state call is a round trip from the Python
worker to the JVM (about 0.1-0.3 ms). A strategy makes a few state accesses per input, so this
adapter sits in between: it reads lazily, caches what it read for the current grouping key,
buffers writes, and :meth:`SparkBackend.flush` writes each dirty entry once at the end of
``handleInputRows``. :meth:`SparkBackend.commit` (called by strategies after every input) is a
no-op: the unit of atomicity is Spark's micro-batch, whose state store version is committed
with the batch (a failed batch is re-run from the previous version).

Layout: every state of ours (value, map) is one Spark ``MapState`` with schema
``k BINARY -> v BINARY``. The Spark user key is the context key for a value state and
``len(context) (4 bytes, big-endian) + context + user key`` for a map state; values are our
msgpack encoding (never pickle). Keying the entries by context as well as by Spark's grouping
key keeps distinct context keys apart even when Spark's grouping merges them (e.g. ``0.0`` and
``-0.0``). Spark's ``MapState`` iterates in its encoded-byte order and cannot seek, so the ordered
map state here loads the grouping key's entries and sorts them in Python: right for small maps
(the TTL timer index of one key), wrong for SORTED's node chains, so ``supports_ordered`` is
False (SORTED is not offered on spark).

With ``SparkBackend(handle, blob=True)`` (key buckets) every state of ours is instead one Spark
``ValueState`` (``v BINARY``) per grouping key holding all of its entries as one msgpack array,
zlib-compressed from 1 KiB on (:class:`BlobSparkMap`, :func:`encode_blob`): read once and
written once per grouping key and batch, which is what a bucket of many sink keys wants
(``MapState`` has no bulk update: one call per written entry).

Everything is per Spark grouping key: a "global" state (the TTL timer index under the empty
context) is one per grouping key here, which is exactly what per-key expiry needs.

This module does not import pyspark: it talks to the handle through the small protocols below
(what ``StatefulProcessorHandle.getMapState`` returns), so the strategies stay testable alone.
"""

from __future__ import annotations

import os
import time
import zlib
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

import msgpack
from mypy_extensions import mypyc_attr

from .base import Value
from .codec import ValueCodec
from .errors import CorruptStateError
from .spark_cache import LocalStateCache, local_cache, namespace

KEY_SCHEMA = "k BINARY"
VALUE_SCHEMA = "v BINARY"


class SparkMapHandle(Protocol):
    """The subset of pyspark's ``MapState`` the adapter uses (keys and values are 1-tuples)."""

    def getValue(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None: ...

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None: ...

    def removeKey(self, key: tuple[Any, ...]) -> None: ...

    def iterator(self) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]: ...


class SparkValueHandle(Protocol):
    """The subset of pyspark's ``ValueState`` the blob layout uses (values are 1-tuples)."""

    def get(self) -> tuple[Any, ...] | None: ...

    def update(self, newValue: tuple[Any, ...]) -> None: ...

    def clear(self) -> None: ...


class SparkListHandle(Protocol):
    """The subset of pyspark's ``ListState`` the log layout uses (values are 1-tuples)."""

    def get(self) -> Iterator[tuple[Any, ...]]: ...

    def put(self, newState: list[tuple[Any, ...]]) -> None: ...

    def appendList(self, newState: list[tuple[Any, ...]]) -> None: ...

    def clear(self) -> None: ...


class SparkStateHandle(Protocol):
    """The subset of pyspark's ``StatefulProcessorHandle`` the adapter uses."""

    def getMapState(
        self, stateName: str, userKeySchema: Any, valueSchema: Any, ttlDurationMs: int | None = None
    ) -> Any: ...

    def getValueState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any: ...

    def getListState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> Any: ...


def map_key(context: bytes, key: bytes) -> bytes:
    """The Spark user key of entry ``key`` of ``context`` in a map state."""
    return len(context).to_bytes(4, "big") + context + key


def split_map_key(storage: bytes) -> tuple[bytes, bytes]:
    """(context, user key) of a Spark user key written by :func:`map_key`."""
    length = int.from_bytes(storage[:4], "big")
    return storage[4 : 4 + length], storage[4 + length :]


@mypyc_attr(allow_interpreted_subclasses=True)
class CachedSparkMap:
    """One Spark ``MapState`` (BINARY -> BINARY) seen through a per-grouping-key cache.

    ``get``: a cached value or one round trip (``getValue``); with ``bulk`` set, the first miss
    loads the whole map of the grouping key instead (one streamed ``iterator()``: Spark sends the
    entries in chunks, so one call for many entries) and later misses are free; ``put``/``delete``:
    cache only; ``scan``: one iteration of the Spark map (then everything is cached); ``flush``:
    one ``updateValue``/``removeKey`` per dirty entry, then the cache is dropped (the next
    grouping key starts cold). Reads see buffered writes.

    ``bulk`` pays off when a grouping key's batch touches a good part of its entries (a key
    bucket holding many sink keys): O(entries) decoding in one call instead of ~55 µs per
    touched entry.
    """

    def __init__(self, name: str, handle: SparkMapHandle, codec: ValueCodec) -> None:
        self.name = name
        self._handle = handle
        self._codec = codec
        self._cache: dict[bytes, Value | None] = {}
        self._dirty: set[bytes] = set()
        self._loaded = False
        self.bulk = False
        self.round_trips = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.seconds = 0.0

    def get(self, storage: bytes) -> Value | None:
        if storage in self._cache:
            return self._cache[storage]
        if self._loaded:
            return None
        if self.bulk:
            self._load()
            return self._cache.get(storage)
        self.round_trips += 1
        started = time.perf_counter()
        stored = self._handle.getValue((storage,))
        self.seconds += time.perf_counter() - started
        if stored is None:
            value = None
        else:
            self.bytes_read += len(stored[0])
            value = self._codec.unpack(stored[0], self.name, storage)
        self._cache[storage] = value
        return value

    def put(self, storage: bytes, value: Value) -> None:
        self._cache[storage] = value
        self._dirty.add(storage)

    def delete(self, storage: bytes) -> None:
        self._cache[storage] = None
        self._dirty.add(storage)

    def scan(self) -> list[tuple[bytes, Value]]:
        """Every live entry of the current grouping key (buffered writes included), sorted by key."""
        if not self._loaded:
            self._load()
        return sorted((key, value) for key, value in self._cache.items() if value is not None)

    def _load(self) -> None:
        """Cache every entry of the current grouping key (cached entries, possibly written, win)."""
        self.round_trips += 1
        started = time.perf_counter()
        cache, unpack, name = self._cache, self._codec.unpack, self.name
        read = 0
        for (storage,), (data,) in self._handle.iterator():
            key = bytes(storage)
            read += len(storage) + len(data)
            if key not in cache:
                cache[key] = unpack(data, name, key)
        self.bytes_read += read
        self.seconds += time.perf_counter() - started
        self._loaded = True

    def flush(self) -> None:
        """Write the dirty entries to Spark and forget the cache."""
        started = time.perf_counter()
        for storage in self._dirty:
            value = self._cache[storage]
            self.round_trips += 1
            if value is None:
                self._handle.removeKey((storage,))
            else:
                data = self._codec.pack(value)
                self.bytes_written += len(storage) + len(data)
                self._handle.updateValue((storage,), (data,))
        self.seconds += time.perf_counter() - started
        self.discard()

    def discard(self) -> None:
        """Forget the cache and the buffered writes (rollback of the grouping key)."""
        self._cache.clear()
        self._dirty.clear()
        self._loaded = False
        self.bulk = False


# A blob of at least this many bytes is stored zlib-compressed (level 1) behind COMPRESSED.
COMPRESS_FROM = 1024
# 0xc1 is the one byte msgpack never uses, so it cannot start a plain blob (an array).
COMPRESSED = b"\xc1"


def encode_blob(data: bytes) -> bytes:
    """The stored form of a msgpack blob: ``COMPRESSED + zlib(data)`` from :data:`COMPRESS_FROM`
    bytes on, else ``data``. O(len(data)); zlib level 1 (~100+ MB/s)."""
    if len(data) < COMPRESS_FROM:
        return data
    return COMPRESSED + zlib.compress(data, 1)


def decode_blob(stored: bytes) -> bytes:
    """The msgpack bytes of a stored blob (:func:`encode_blob`; plain blobs of earlier builds
    pass unchanged). zlib.error for a damaged compressed blob."""
    if stored[:1] == COMPRESSED:
        return zlib.decompress(memoryview(stored)[1:])
    return stored


@mypyc_attr(allow_interpreted_subclasses=True)
class BlobSparkMap(CachedSparkMap):
    """One state of a grouping key as a single Spark ``ValueState`` blob (``v BINARY``): a msgpack
    array ``[key, value bytes, key, value bytes, ...]`` of every entry, zlib-compressed from
    :data:`COMPRESS_FROM` bytes on (:func:`encode_blob`): Spark's state server hands a
    ``BINARY`` value to Python through a per-byte pickle, and a batch that touches a bucket
    reads and rewrites its whole blob, so fewer bytes are cheaper end to end. Plain blobs written
    by earlier builds are read as they are; an earlier build refuses a compressed blob with
    :class:`CorruptStateError` (it starts with a byte msgpack never uses) instead of misreading it.

    The first access of a batch reads the blob (one call; entries are decoded only when asked
    for); :meth:`flush` writes it back whole (one call) if anything changed. So a grouping key
    costs two state calls per batch however many entries it touches, and O(its entries) bytes:
    the layout for key buckets, whose batches touch many of their sink keys (``MapState`` would
    need one ~55 µs call per written entry: it has no bulk update).
    """

    def __init__(self, name: str, handle: SparkValueHandle, codec: ValueCodec) -> None:
        # Not CachedSparkMap.__init__: there is no MapState; every method using one is overridden.
        self.name = name
        self._blob = handle
        self._codec = codec
        self._cache: dict[bytes, Value | None] = {}
        self._dirty: set[bytes] = set()
        self._stored: dict[bytes, bytes] = {}
        self._loaded = False
        self.bulk = False
        self.round_trips = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.seconds = 0.0

    def get(self, storage: bytes) -> Value | None:
        if storage in self._cache:
            return self._cache[storage]
        if not self._loaded:
            self._load()
        data = self._stored.get(storage)
        value = None if data is None else self._codec.unpack(data, self.name, storage)
        self._cache[storage] = value
        return value

    def _load(self) -> None:
        """Read the grouping key's blob (entries stay encoded until asked for)."""
        self.round_trips += 1
        started = time.perf_counter()
        stored = self._blob.get()
        if stored is not None:
            self.bytes_read += len(stored[0])
            try:
                flat = msgpack.unpackb(decode_blob(stored[0]), raw=False)
                self._stored = dict(zip(flat[::2], flat[1::2], strict=True))
            except Exception as error:
                raise CorruptStateError(
                    f"state {self.name!r}: cannot decode the grouping key's entries: {error}"
                ) from error
        self.seconds += time.perf_counter() - started
        self._loaded = True

    def scan(self) -> list[tuple[bytes, Value]]:
        """Every live entry of the current grouping key (buffered writes included), sorted by key."""
        if not self._loaded:
            self._load()
        return _scanned(self._cache, self._stored, self._codec, self.name)

    def flush(self) -> None:
        """Write the blob back (one call) if an entry changed; forget the cache."""
        if self._dirty:
            if not self._loaded:
                self._load()
            started = time.perf_counter()
            stored, pack = self._stored, self._codec.pack
            for key in self._dirty:
                value = self._cache[key]
                if value is None:
                    stored.pop(key, None)
                else:
                    stored[key] = pack(value)
            self.round_trips += 1
            if stored:
                blob = encode_blob(msgpack.packb(_flat(stored), use_bin_type=True))
                self.bytes_written += len(blob)
                self._blob.update((blob,))
            else:
                self._blob.clear()
            self.seconds += time.perf_counter() - started
        self.discard()

    def discard(self) -> None:
        """Forget the cache, the loaded blob and the buffered writes."""
        self._stored = {}
        self._cache.clear()
        self._dirty.clear()
        self._loaded = False
        self.bulk = False


LOG_SUFFIX = "~log"
HEAD_SUFFIX = "~head"
LOG_CHUNK = 16384
"""Entries per element of a compacted log (an element is one value through Spark's state server)."""
COMPACT_MIN = 1024
"""A log is compacted once it holds more logged entries than twice the live ones plus this."""
INLINE_MAX = 32768
"""A state whose stored entries (:func:`encode_blob`) take at most this many bytes is kept whole in
its head (:class:`LogSparkMap`'s inline form); above it, as a log. Measured: at 100,000 keys in 256
buckets a bucket's entries take ~7.4 KB, where the inline form's two calls beat the log's three plus
the local copy (docs/spark.md, "State at table scale")."""


def _chunk(entries: list[Any]) -> bytes:
    """A log element: ``[key, value or nil, key, value or nil, ...]`` (nil: deleted), msgpack,
    compressed as blobs are (:func:`encode_blob`)."""
    return encode_blob(msgpack.packb(entries, use_bin_type=True))


@mypyc_attr(allow_interpreted_subclasses=True)
class LogSparkMap(CachedSparkMap):
    """One state of a grouping key as an append-only log in Spark, read through a machine-local
    copy (:mod:`.spark_cache`): what a batch reads and writes follows the entries it touches,
    not the entries the grouping key holds; a small state is kept whole in its head instead.

    In Spark, per grouping key, a ``ValueState`` ``NAME~head`` in one of two forms:

    - inline, ``[entries]``: the state's entries as one blob (:func:`encode_blob` of
      ``[key, value, ...]``), while it takes at most ``inline_max`` bytes. Read with the head,
      written back whole: two Spark calls per batch, no log, no local copy (the blob layout's
      cost, which is the cheaper one for small states).
    - log, ``[token, logged, live]``: the random token of the version, the entries the log holds
      and the live ones; the entries are in a ``ListState`` ``NAME~log`` whose elements are the
      changed entries of one write each (:func:`_chunk`, appended with ONE ``appendList`` call).
      When ``logged`` passes ``2 * live + COMPACT_MIN`` the log is rewritten as the live entries
      (``put``), so a log is O(live) and the writes amortised O(changed entries) per batch.

    A state written inline that outgrows ``inline_max`` is written as a log (one ``put`` of all of
    its entries); a log whose compaction finds its entries under half of ``inline_max`` goes back
    inline (the log cleared): the gap between the two keeps a state at the border from
    alternating, and each move is paid by the batches since the last one.

    Reads of the log form: the head (one call), then each touched entry from the local copy if
    it holds the head's token (no Spark call, no decoding of others), else the whole log is read
    once and the copy rebuilt (the first batch on a machine, after a failed task, after the copy
    was lost). Writes (:meth:`flush`): one ``appendList`` (or ``put``), one head update, then the
    copy moved to the new token. Per grouping key and batch: three Spark calls and O(touched
    entries) bytes on a warm copy. A state in the inline form never reads the copy, so a task
    whose state Spark did not commit cannot leave anything behind that a retry would trust.

    Migration: a grouping key whose head is absent but whose blob of the ``blob`` layout
    (:class:`BlobSparkMap`, ValueState ``NAME``) exists is read from the blob once; its first
    write stores it inline or as a log and clears the blob. So a checkpoint written with blobs
    continues, as does one whose heads are all of the log form (builds before the inline form).
    """

    def __init__(
        self,
        name: str,
        log: SparkListHandle,
        head: SparkValueHandle,
        legacy: SparkValueHandle,
        codec: ValueCodec,
        cache: LocalStateCache,
        scope: str,
        inline_max: int = INLINE_MAX,
    ) -> None:
        # Not CachedSparkMap.__init__: there is no MapState; every method using one is overridden.
        self.name = name
        self._log = log
        self._head = head
        self._legacy = legacy
        self._codec = codec
        self._local = cache
        self._scope = scope
        self._inline_max = inline_max
        self._space = b""
        self._cache: dict[bytes, Value | None] = {}
        self._dirty: set[bytes] = set()
        self._loaded = False
        self.bulk = False
        self.round_trips = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.seconds = 0.0
        self.rebuilds = 0
        self._token: bytes | None = None
        self._logged = 0
        self._live = 0
        self._reader: Any = None
        self._entries: dict[bytes, bytes] | None = None  # the whole state when not read from the copy
        self._migrated = False
        self._written = b""  # the token of the version the last log write stored
        self._found: dict[bytes, bool] = {}  # whether get found each key it read stored

    def begin(self, group: bytes) -> None:
        """Start work on grouping key ``group`` (its msgpack encoding)."""
        self._space = namespace(self._scope, self.name, group)

    def _load(self) -> None:
        self.round_trips += 1
        started = time.perf_counter()
        stored = self._head.get()
        if stored is not None:
            self.bytes_read += len(stored[0])
            head = _head_of(stored[0], self.name)
            if len(head) == 1:  # inline: [entries]
                self._entries = _blob_entries(head[0], self.name)
                self._live = len(self._entries)
            else:  # log: [token, logged, live]
                self._token, self._logged, self._live = bytes(head[0]), int(head[1]), int(head[2])
                self._reader = self._local.begin(self._space, self._token)
                if self._reader is None:
                    self._entries = self._read_log()
                    self.rebuilds += 1
                    self._local.replace(self._space, self._token, self._entries)
        else:
            self._token, self._logged, self._live = None, 0, 0
            self._entries = {}
            self.round_trips += 1
            legacy = self._legacy.get()
            if legacy is not None:
                self.bytes_read += len(legacy[0])
                self._entries = _blob_entries(legacy[0], self.name)
                self._live = len(self._entries)
                self._migrated = True
        self.seconds += time.perf_counter() - started
        self._loaded = True

    def _read_log(self) -> dict[bytes, bytes]:
        """The state the log holds: its elements applied in order (one streamed call)."""
        self.round_trips += 1
        entries: dict[bytes, bytes] = {}
        for (element,) in self._log.get():
            self.bytes_read += len(element)
            try:
                flat = msgpack.unpackb(decode_blob(element), raw=False)
            except Exception as error:
                raise CorruptStateError(
                    f"state {self.name!r}: cannot decode a log element: {error}"
                ) from error
            for index in range(0, len(flat), 2):
                value = flat[index + 1]
                if value is None:
                    entries.pop(flat[index], None)
                else:
                    entries[flat[index]] = value
        return entries

    def _stored(self, storage: bytes) -> bytes | None:
        if self._entries is not None:
            return self._entries.get(storage)
        return self._local.get(self._reader, self._space, storage)

    def get(self, storage: bytes) -> Value | None:
        if storage in self._cache:
            return self._cache[storage]
        if not self._loaded:
            self._load()
        data = self._stored(storage)
        self._found[storage] = data is not None
        value = None if data is None else self._codec.unpack(data, self.name, storage)
        self._cache[storage] = value
        return value

    def _all(self) -> dict[bytes, bytes]:
        """Every stored entry (as stored, buffered writes not applied)."""
        if self._entries is not None:
            return self._entries
        return dict(self._local.items(self._reader, self._space))

    def scan(self) -> list[tuple[bytes, Value]]:
        """Every live entry of the current grouping key (buffered writes included), sorted by key."""
        if not self._loaded:
            self._load()
        return _scanned(self._cache, self._all(), self._codec, self.name)

    def flush(self) -> None:
        """Write the changed entries: the head whole (inline form: one call), or logged (one
        call) and the head (one call) with the local copy moved; see the class for when the
        form changes."""
        if self._dirty:
            if not self._loaded:
                self._load()
            started = time.perf_counter()
            pack = self._codec.pack
            changes: dict[bytes, bytes | None] = {}
            live = self._live
            found, stored = self._found, self._stored
            for key in self._dirty:
                value = self._cache[key]
                # A key get read is known (not looked up twice); one written unread is looked up.
                before = found[key] if key in found else stored(key) is not None
                if value is None:
                    changes[key] = None
                    live -= before
                else:
                    changes[key] = pack(value)
                    live += not before
            logs = self._token is not None  # the stored form is the log
            logged = self._logged + len(changes)
            whole = None
            if live > 0 and not (logs and logged <= 2 * live + COMPACT_MIN):
                whole = _applied(self._all(), changes)  # inline, or a compacted log
            # Every read of the copy is done: its read transaction must end before it is written.
            self._local.end(self._reader)
            self._reader = None
            if whole is None and live > 0:
                self._write_log([(_chunk(_flat(dict(sorted(changes.items())))),)], logged, live, False)
                self._local.update(self._space, self._token, self._written, changes)
            elif whole is not None and not self._write_inline(whole, logs):
                flat = _flat(dict(sorted(whole.items())))
                chunks = [
                    (_chunk(flat[start : start + 2 * LOG_CHUNK]),)
                    for start in range(0, len(flat), 2 * LOG_CHUNK)
                ]
                self._write_log(chunks, live, live, True)
                self._local.replace(self._space, self._written, whole)
            else:  # empty, or now inline: no log, no copy
                if whole is None:
                    self.round_trips += 1
                    self._head.clear()
                if logs:
                    self.round_trips += 1
                    self._log.clear()
                    self._local.drop(self._space)
            if self._migrated:
                self.round_trips += 1
                self._legacy.clear()
            self.seconds += time.perf_counter() - started
        self.discard()

    def _write_inline(self, entries: dict[bytes, bytes], logs: bool) -> bool:
        """Write the head as the inline form of ``entries`` if they fit (a log must fit in half of
        ``inline_max`` to move back); whether it was written."""
        blob = encode_blob(msgpack.packb(_flat(entries), use_bin_type=True))
        if len(blob) > (self._inline_max // 2 if logs else self._inline_max):
            return False
        head = msgpack.packb([blob], use_bin_type=True)
        self._head.update((head,))
        self.round_trips += 1
        self.bytes_written += len(head)
        return True

    def _write_log(self, elements: list[tuple[bytes]], logged: int, live: int, rewrite: bool) -> None:
        """Append ``elements`` to the log (or, with ``rewrite``, make them the log), then write the
        head with a new token (:attr:`_written`)."""
        if rewrite:
            self._log.put(elements)
        else:
            self._log.appendList(elements)
        self._written = os.urandom(16)
        head = msgpack.packb([self._written, logged, live], use_bin_type=True)
        self._head.update((head,))
        self.round_trips += 2
        self.bytes_written += sum(len(element[0]) for element in elements) + len(head)

    def discard(self) -> None:
        """Forget what this grouping key read and buffered (the local copy stays as it was)."""
        self._local.end(self._reader)
        self._reader = None
        self._entries = None
        self._token = None
        self._migrated = False
        self._cache.clear()
        self._found.clear()
        self._dirty.clear()
        self._loaded = False
        self.bulk = False


def _flat(entries: Mapping[bytes, bytes | None]) -> list[bytes | None]:
    """``[key, value, key, value, ...]`` of ``entries``, in their order."""
    return [item for pair in entries.items() for item in pair]


def _head_of(stored: bytes, name: str) -> list[Any]:
    """The decoded head of a :class:`LogSparkMap`: ``[entries blob]`` or ``[token, logged, live]``."""
    try:
        head = msgpack.unpackb(stored, raw=False)
        if isinstance(head, list) and (
            (len(head) == 1 and isinstance(head[0], bytes))
            or (len(head) == 3 and isinstance(head[0], bytes) and all(isinstance(n, int) for n in head[1:]))
        ):
            return head
        raise ValueError(f"not a head: {head!r:.80}")
    except Exception as error:
        raise CorruptStateError(f"state {name!r}: cannot decode the log's head: {error}") from error


def _applied(entries: dict[bytes, bytes], changes: dict[bytes, bytes | None]) -> dict[bytes, bytes]:
    """A copy of ``entries`` with ``changes`` applied (None: deleted)."""
    result = dict(entries)
    for key, data in changes.items():
        if data is None:
            result.pop(key, None)
        else:
            result[key] = data
    return result


def _scanned(
    cache: dict[bytes, Value | None], stored: dict[bytes, bytes], codec: ValueCodec, name: str
) -> list[tuple[bytes, Value]]:
    """Every live entry: the stored ones decoded into ``cache`` where it has none (buffered
    writes win), sorted by key."""
    for key, data in stored.items():
        if key not in cache:
            cache[key] = codec.unpack(data, name, key)
    return sorted((key, value) for key, value in cache.items() if value is not None)


def _blob_entries(stored: bytes, name: str) -> dict[bytes, bytes]:
    """The entries of a :class:`BlobSparkMap` blob."""
    try:
        flat = msgpack.unpackb(decode_blob(stored), raw=False)
        return dict(zip(flat[::2], flat[1::2], strict=True))
    except Exception as error:
        raise CorruptStateError(
            f"state {name!r}: cannot decode the grouping key's entries: {error}"
        ) from error


@mypyc_attr(allow_interpreted_subclasses=True)
class SparkValueState:
    """``ValueState`` over a :class:`CachedSparkMap` keyed by the context key."""

    def __init__(self, store: CachedSparkMap) -> None:
        self._store = store

    def get(self, context: bytes) -> Value | None:
        return self._store.get(context)

    def put(self, context: bytes, value: Value) -> None:
        self._store.put(context, value)

    def delete(self, context: bytes) -> None:
        self._store.delete(context)

    def contexts(self) -> Iterator[bytes]:
        """The contexts of the current grouping key that hold a value (Spark cannot scan others)."""
        for context, _ in self._store.scan():
            yield context


@mypyc_attr(allow_interpreted_subclasses=True)
class SparkMapState:
    """``MapState`` over a :class:`CachedSparkMap` keyed by :func:`map_key`."""

    def __init__(self, store: CachedSparkMap) -> None:
        self._store = store

    def get(self, context: bytes, key: bytes) -> Value | None:
        return self._store.get(map_key(context, key))

    def put(self, context: bytes, key: bytes, value: Value) -> None:
        self._store.put(map_key(context, key), value)

    def delete(self, context: bytes, key: bytes) -> None:
        self._store.delete(map_key(context, key))

    def items(self, context: bytes) -> Iterator[tuple[bytes, Value]]:
        """Entries of ``context`` (one scan of the grouping key's Spark map per batch)."""
        prefix = map_key(context, b"")
        for storage, value in self._store.scan():
            if storage.startswith(prefix):
                yield storage[len(prefix) :], value

    def clear(self, context: bytes) -> None:
        for key, _ in list(self.items(context)):
            self.delete(context, key)

    def contexts(self) -> Iterator[bytes]:
        """The contexts of the current grouping key with entries."""
        seen: set[bytes] = set()
        for storage, _ in self._store.scan():
            context, _ = split_map_key(storage)
            if context not in seen:
                seen.add(context)
                yield context


@mypyc_attr(allow_interpreted_subclasses=True)
class SparkSortedMapState(SparkMapState):
    """``SortedMapState`` by scanning: the first ordered call of a batch loads the grouping key's
    entries (one Spark iteration), each ordered call then sorts them in Python: O(n log n).

    Meant for small per-key maps (the TTL timer index of one grouping key), not for SORTED's
    node chains: Spark's ``MapState`` has no seek.
    """

    def _ordered(self, context: bytes) -> list[tuple[bytes, Value]]:
        return list(self.items(context))

    def first(self, context: bytes) -> tuple[bytes, Value] | None:
        entries = self._ordered(context)
        return entries[0] if entries else None

    def last(self, context: bytes) -> tuple[bytes, Value] | None:
        entries = self._ordered(context)
        return entries[-1] if entries else None

    def before(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        below = [entry for entry in self._ordered(context) if entry[0] < key]
        return below[-1] if below else None

    def ceiling(self, context: bytes, key: bytes) -> tuple[bytes, Value] | None:
        return next((entry for entry in self._ordered(context) if entry[0] >= key), None)


@mypyc_attr(allow_interpreted_subclasses=True)
class SparkBackend:
    """A :class:`~upsertmat.impls.state.base.StateBackend` on a Spark ``StatefulProcessorHandle``.

    Create it in ``StatefulProcessor.init`` (Spark registers state variables there), build the
    strategy on it, and call :meth:`flush` once at the end of each ``handleInputRows``. States
    are created on first use, each a Spark ``MapState`` named like ours, or with ``blob`` a
    Spark ``ValueState`` holding all of the grouping key's entries (:class:`BlobSparkMap`: two
    calls per grouping key and batch; for key buckets). The layout is pinned in the checkpoint.
    """

    name = "spark"
    supports_ordered = False

    def __init__(
        self,
        handle: SparkStateHandle,
        blob: bool = False,
        key_schema: Any = KEY_SCHEMA,
        value_schema: Any = VALUE_SCHEMA,
        log_scope: str | None = None,
        log_home: str | None = None,
        inline_max: int = INLINE_MAX,
    ) -> None:
        # The schemas: DDL strings, or the equal pyspark StructTypes, which spare pyspark two
        # round trips to the JVM per registered state and task (a DDL string is parsed by the
        # JVM, twice); the state's schema in the checkpoint is the same either way.
        self._handle = handle
        self._codec = ValueCodec()
        self._blob = blob
        self._key_schema = key_schema
        self._value_schema = value_schema
        self._stores: dict[str, CachedSparkMap] = {}
        self._log_scope = log_scope
        self._log_home = log_home
        self._inline_max = inline_max
        self._group = b""

    def begin(self, group: bytes) -> None:
        """Start work on the grouping key ``group`` (its encoding: the log layout names its local
        copy by it). Call before the strategy's first access of each grouping key."""
        self._group = group
        for store in self._stores.values():
            if isinstance(store, LogSparkMap):
                store.begin(group)

    def _store(self, name: str) -> CachedSparkMap:
        store = self._stores.get(name)
        if store is None:
            scope = self._log_scope
            if scope is not None:
                handle = self._handle
                schema = self._value_schema
                log_store = LogSparkMap(
                    name,
                    handle.getListState(name + LOG_SUFFIX, schema),
                    handle.getValueState(name + HEAD_SUFFIX, schema),
                    handle.getValueState(name, schema),
                    self._codec,
                    local_cache(scope, self._log_home),
                    scope,
                    self._inline_max,
                )
                log_store.begin(self._group)
                store = self._stores[name] = log_store
            elif self._blob:
                value_state = self._handle.getValueState(name, self._value_schema)
                store = self._stores[name] = BlobSparkMap(name, value_state, self._codec)
            else:
                spark_map = self._handle.getMapState(name, self._key_schema, self._value_schema)
                store = self._stores[name] = CachedSparkMap(name, spark_map, self._codec)
        return store

    def value_state(self, name: str) -> SparkValueState:
        return SparkValueState(self._store(name))

    def map_state(self, name: str) -> SparkMapState:
        return SparkMapState(self._store(name))

    def sorted_map_state(self, name: str) -> SparkSortedMapState:
        """An ordered map state by scanning (:class:`SparkSortedMapState`): fine for the TTL
        timer index of one key, too slow for SORTED's node chains."""
        return SparkSortedMapState(self._store(name))

    def bulk_reads(self, enabled: bool) -> None:
        """For the current grouping key: load each touched state whole on its first miss (one
        streamed iteration) instead of one ``getValue`` per entry. Reset by :meth:`flush`."""
        for store in self._stores.values():
            store.bulk = enabled

    @property
    def round_trips(self) -> int:
        """State calls made to the JVM so far (reads, scans and flushed writes)."""
        return sum(store.round_trips for store in self._stores.values())

    @property
    def rebuilds(self) -> int:
        """Grouping-key states of the log layout read whole from Spark because the local copy did
        not hold their version (0 for the other layouts)."""
        return sum(store.rebuilds for store in self._stores.values() if isinstance(store, LogSparkMap))

    def traffic(self) -> tuple[int, int, int, float]:
        """(state calls, bytes read, bytes written, seconds in state access) so far, over every
        state: what a micro-batch's state access cost (bytes as stored, keys included; seconds:
        the JVM round trips, plus decoding and encoding where a whole blob is read or written)."""
        stores = self._stores.values()
        return (
            sum(store.round_trips for store in stores),
            sum(store.bytes_read for store in stores),
            sum(store.bytes_written for store in stores),
            sum(store.seconds for store in stores),
        )

    def commit(self) -> None:
        """No-op: Spark commits the state store with the micro-batch."""

    def checkpoint(self) -> None:
        """No-op: Spark commits the state store with the micro-batch."""

    def rollback(self) -> None:
        """Drop the buffered reads and writes of the current grouping key.

        Spark's unit of atomicity is the micro-batch: a processor that raises fails the task,
        and Spark retries the batch from the last committed state store version."""
        for store in self._stores.values():
            store.discard()

    def flush(self) -> None:
        """Write every buffered change of the current grouping key to Spark; drop the caches."""
        for store in self._stores.values():
            store.flush()

    def close(self) -> None:
        """Nothing to release (Spark owns the state store)."""
