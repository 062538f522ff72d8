"""A machine-local copy of the Spark backend's logged state, shared by the Python workers (LMDB).

Spark's state store is where the pipeline's state lives (checkpointed, recovered, exactly once);
this is a cache of it, so that a micro-batch reads only the entries it touches instead of a
bucket's whole state. Spark hands a partition's task to whichever Python worker is idle (the
two workers of ``local[2]`` swap partitions about every other batch), so a per-process cache
would miss half the time: the copy is one LMDB environment per machine and scope that every
worker process opens (LMDB is multi-process safe: one writer at a time, readers never blocked).

Layout, per *namespace* (16 bytes naming one state of one grouping key of one query: a hash of
the scope, the state's name and the grouping key):

- ``namespace + b"t"`` -> the token of the Spark state version the copy holds;
- ``namespace + b"e" + storage key`` -> the stored value (the backend's msgpack bytes).

The token is what makes the copy safe to use. Every write of a grouping key's state draws a new
random token and stores it in Spark's state beside the log, in the same task; the copy is
updated to that token in one LMDB transaction afterwards. A later batch uses the copy only if
the token Spark holds equals the copy's: Spark commits a task's state writes with the batch or
not at all, so an equal token means the copy holds exactly the committed state. A task that
failed after updating the copy (or a speculative twin) leaves a token Spark never committed:
the next batch sees them differ and rebuilds the copy from Spark's log. Reads of one grouping
key happen in one LMDB read transaction opened when its token was checked (a snapshot: a
concurrent writer of the same namespace cannot change what the task reads), and an update is
applied only if the copy still holds the token the task started from (compare and set).

It is a cache: no fsync (``sync=False``), nothing in it is needed to recover. Writes go straight
into the memory map (``writemap=True``): a batch changes a few hundred random entries of each
of 256 grouping keys, about a page each, and LMDB's default copies every page a transaction
dirties into a buffer and writes it back with ``pwrite`` at the commit, which at 10,000,000
entries took 1.4-3.0x as long, growing batch by batch (docs/benchmarks.md, "The local copy's
write transactions"). A written map is a file as long as the map, so the map starts at
:data:`MAP_SIZE_START` and doubles while the copy uses more than half of it
(:meth:`LocalStateCache.reserve`): the file is two to four times the pages LMDB has used, sparse
beyond the pages written. A process may only resize its map while it holds no transaction: a
write that finds the map full while one of its reads is open leaves the copy as it was (its
token then differs from Spark's and the next batch rebuilds it), and the map grows before the
next grouping key. An LMDB error
of any other kind (the disk full, a damaged file after an OS crash) turns the cache off in that
process with one warning; the backend then reads each touched grouping key's log from Spark,
which is correct and costs what the bucket holds. Since nothing is fsynced, a copy written
before the operating system last booted is removed when a process first opens it
(:func:`discard_after_reboot`): after an OS crash its pages may be any mix of old and new.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import tempfile
import weakref
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import lmdb

LOG = logging.getLogger("upsertmat.spark.state")
TOKEN = b"t"
ENTRY = b"e"
MAP_SIZE_START = 1 << 26
"""The map size an environment is opened with (64 MiB; grown by :meth:`LocalStateCache.reserve`)."""
MAP_SIZE_MAX = 1 << 40
"""The largest map a copy grows to (1 TiB); a copy that fills it turns the cache off."""
RETRIES = 64
"""Attempts of one write (each after the map grew): more than the doublings from
:data:`MAP_SIZE_START` to :data:`MAP_SIZE_MAX`."""
BOOT_FILE = "boot-id"
"""The file beside the environment naming the operating system boot that wrote it."""
OPEN_LOCK = "open.lock"
"""The file the processes of a machine hold (``flock``) while one checks the boot and opens."""
DIRECTORY_VARIABLE = "UPSERTMAT_SPARK_STATE_CACHE"
"""Where the copies live, overriding the query's own place (``off`` turns the cache off)."""


def namespace(scope: str, state: str, group: bytes) -> bytes:
    """The 16-byte namespace of ``state`` of grouping key ``group`` in ``scope`` (a query)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in (scope.encode(), state.encode(), group):
        digest.update(len(part).to_bytes(4, "big"))
        digest.update(part)
    return digest.digest()


def boot_id() -> str:
    """The running boot of the operating system (Linux's random boot id; empty where none)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def discard_after_reboot(directory: Path) -> bool:
    """Remove the environment in ``directory`` if another boot wrote it (whether it did), and
    name this boot in it. Nothing in the copy is fsynced, so an operating-system crash can leave
    its pages in any mix of old and new, which no token can tell; a process crash cannot (the
    kernel keeps what a process wrote). The caller holds :data:`OPEN_LOCK`."""
    marker = directory / BOOT_FILE
    current = boot_id()
    try:
        written = marker.read_text().strip()
    except FileNotFoundError:
        written = None
    removed = False
    if written != current:
        for name in ("data.mdb", "lock.mdb"):
            target = directory / name
            if target.exists():
                target.unlink()
                removed = True
        marker.write_text(current + "\n")
    return removed


def cache_directory(scope: str, home: str | None = None) -> Path | None:
    """The environment directory of ``scope`` (None: the cache is off): under
    :data:`DIRECTORY_VARIABLE` if it is set, else ``home`` (the pipeline gives a local query's
    checkpoint directory, so the copy goes with the checkpoint), else under
    ``<tmp>/upsertmat-spark-state-<uid>/`` (a cluster's executors: their local disk)."""
    base = os.environ.get(DIRECTORY_VARIABLE, "")
    if base.strip().lower() == "off":
        return None
    if not base and home is not None:
        return Path(home)
    root = Path(base) if base else Path(tempfile.gettempdir()) / f"upsertmat-spark-state-{os.getuid()}"
    return root / hashlib.blake2b(scope.encode(), digest_size=8).hexdigest()


class LocalStateCache:
    """One LMDB environment (see the module); every method is O(entries touched) and never
    raises: an LMDB error disables the cache (:attr:`enabled`) and the call answers "no copy".

    ``map_size``: the map the environment is opened with (a test gives a small one to make it
    grow)."""

    def __init__(self, directory: Path | None, map_size: int = MAP_SIZE_START) -> None:
        self.enabled = directory is not None
        self._env: Any = None
        self._directory = directory
        self._map_size = map_size
        # The read transactions of begin() not yet ended or dropped (the map cannot move while one
        # is open); weak, so that a task that failed between a read and its flush, whose
        # transactions LMDB aborts when they are dropped, does not hold the map still for good.
        self._readers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._full = False  # a write found the map full: grow it at the next chance
        self._psize = 0
        self.resizes = 0

    def _open(self) -> Any:
        if self._env is None and self.enabled and self._directory is not None:
            try:
                self._directory.mkdir(parents=True, exist_ok=True)
                with (self._directory / OPEN_LOCK).open("a") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
                    if discard_after_reboot(self._directory):
                        LOG.info("upsertmat: the local state copy %s was written before a reboot: "
                                 "discarded, rebuilt from Spark's state", self._directory)  # fmt: skip
                    self._env = lmdb.open(
                        str(self._directory), map_size=self._map_size, sync=False, metasync=False,
                        writemap=True, max_readers=256, readahead=False,
                    )  # fmt: skip
            except Exception as error:
                self._disable(error)
        return self._env

    def _disable(self, error: BaseException) -> None:
        if self.enabled:
            LOG.warning(
                "upsertmat: the local state cache %s is off in this process (%s: %s); each touched "
                "bucket's state is read from Spark instead",
                self._directory,
                type(error).__name__,
                error,
            )
        self.enabled = False
        self._env = None

    def reserve(self) -> None:
        """Grow the map (doubling) if the copy uses more than half of it (another process's
        writes included) or a write found it full, while this process holds no transaction on it
        (else nothing: a later call grows it). O(1); called before every transaction."""
        if self._readers or self._env is None:
            return
        try:
            info = self._env.info()
            used = (info["last_pgno"] + 1) * self._page_size()
            current = target = info["map_size"]
            if self._full:
                target *= 2
            while target < 2 * used:
                target *= 2
            if target > current:
                if current >= MAP_SIZE_MAX:
                    raise lmdb.MapFullError(f"the copy fills the largest map ({MAP_SIZE_MAX:,} bytes)")
                self._env.set_mapsize(min(target, MAP_SIZE_MAX))
                self.resizes += 1
            self._full = False
        except Exception as error:
            self._disable(error)

    def _page_size(self) -> int:
        if not self._psize:
            self._psize = int(self._env.stat()["psize"])
        return self._psize

    def begin(self, space: bytes, token: bytes) -> Any | None:
        """A read transaction on the copy of ``space`` if it holds ``token`` (None otherwise:
        rebuild it). The caller ends it (:meth:`end`)."""
        env = self._open()
        if env is None:
            return None
        self.reserve()
        try:
            try:
                transaction = env.begin()
            except lmdb.MapResizedError:  # another process grew it while this one holds a read
                return None
            if transaction.get(space + TOKEN) == token:
                self._readers.add(transaction)
                return transaction
            transaction.abort()
        except Exception as error:
            self._disable(error)
        return None

    def get(self, transaction: Any, space: bytes, key: bytes) -> bytes | None:
        """The stored value of ``key`` in the copy read by ``transaction``."""
        found = transaction.get(space + ENTRY + key)
        return None if found is None else bytes(found)

    def items(self, transaction: Any, space: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every ``(storage key, value)`` of the copy, in key order."""
        prefix = space + ENTRY
        cursor = transaction.cursor()
        if not cursor.set_range(prefix):
            return
        for key, value in cursor:
            if not key.startswith(prefix):
                return
            yield bytes(key[len(prefix) :]), bytes(value)

    def end(self, transaction: Any | None) -> None:
        """End a read transaction of :meth:`begin`."""
        if transaction is not None:
            self._readers.discard(transaction)
            try:
                transaction.abort()
            except Exception as error:
                self._disable(error)

    def _write(self, apply: Callable[[Any], None]) -> None:
        """Run ``apply`` in one LMDB write transaction, committed if it returns. A map too small
        for it is grown (doubling) and the write run again; a full map, or one another process
        grew, while this process holds a read leaves the copy as it was (see the module); any
        other LMDB error turns the cache off instead of reaching the caller."""
        for _ in range(RETRIES):
            env = self._open()
            if env is None:
                return
            self.reserve()
            try:
                with env.begin(write=True) as transaction:
                    apply(transaction)
                return
            except lmdb.MapFullError:
                self._full = True
                if self._readers:
                    return
            except lmdb.MapResizedError:  # another process grew it: reserve() takes it on
                if self._readers:
                    return
            except Exception as error:
                self._disable(error)
                return

    def update(
        self, space: bytes, start: bytes | None, token: bytes, changes: Mapping[bytes, bytes | None]
    ) -> None:
        """Move the copy of ``space`` from token ``start`` to ``token`` by ``changes`` (None:
        deleted), in one transaction, only if it still holds ``start``; otherwise leave it (the
        next batch rebuilds it)."""

        def apply(transaction: Any) -> None:
            if transaction.get(space + TOKEN) != start:
                return
            prefix = space + ENTRY
            for key, value in changes.items():
                if value is None:
                    transaction.delete(prefix + key)
                else:
                    transaction.put(prefix + key, value)
            transaction.put(space + TOKEN, token)

        self._write(apply)

    def replace(self, space: bytes, token: bytes, entries: Mapping[bytes, bytes]) -> None:
        """Make the copy of ``space`` exactly ``entries`` at ``token`` (a rebuild from Spark's log)."""

        def apply(transaction: Any) -> None:
            self._clear(transaction, space)
            prefix = space + ENTRY
            for key, value in entries.items():
                transaction.put(prefix + key, value)
            transaction.put(space + TOKEN, token)

        self._write(apply)

    def drop(self, space: bytes) -> None:
        """Forget the copy of ``space`` (its grouping key holds no state any more)."""
        self._write(lambda transaction: self._clear(transaction, space))

    @staticmethod
    def _clear(transaction: Any, space: bytes) -> None:
        transaction.delete(space + TOKEN)
        prefix = space + ENTRY
        cursor = transaction.cursor()
        if cursor.set_range(prefix):
            while cursor.key().startswith(prefix):
                if not cursor.delete():
                    break


_CACHES: dict[str, LocalStateCache] = {}


def local_cache(scope: str, home: str | None = None) -> LocalStateCache:
    """The cache of ``scope`` in this process (opened on first use, kept for the process's life;
    ``home``: see :func:`cache_directory`)."""
    cache = _CACHES.get(scope)
    if cache is None:
        cache = _CACHES[scope] = LocalStateCache(cache_directory(scope, home))
    return cache
