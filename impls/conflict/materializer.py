"""The compacting materializer (rules C1-C6) on the keyed-state API of every backend.

State layout (names of the backend's states):

- ``conflict-current`` (value): context -> the row the sink shows. Absent = none.
- ``conflict-pending`` (map): context -> {big-endian seq -> ``[is_add, row]``}: the key's raw
  changes since the last watermark, in arrival order by seq. Rule C1's cancellation is applied
  when the key is compacted (:func:`.fold.cancel_pending`): it depends only on the order of the
  key's own changes, so the outcome is the same as cancelling on arrival, and an input costs no
  reads. Seqs come from one counter per operator instance (restarted at 0 after a watermark;
  on open, one past the greatest stored seq).
- ``conflict-dirty`` (value): context -> 1, present exactly for the keys with buffered changes.
- ``conflict-meta`` (value): ``b"watermark"`` -> the last watermark (survives a restart, so a
  replayed time line is not a second watermark).

The dirty index and the pending seqs are read once, on open, into memory: per key with pending
changes, the seqs of its changes (O(pending) memory, bounded by the watermark interval). A
watermark walks that, not the stored state: a range scan on RocksDB crosses the deletion marks
of everything compacted before (measured with ``python -m upsertmat.bench.conflict``, many-keys,
a watermark every 10 changes, rocksdb: 0.3 ops/ms when the stored dirty index was scanned,
1.6 with point reads of the keys but a scan of each key's pending map, 32 with neither).

Costs: an input is one context-key encoding and one or two state writes (no reads). A watermark
is O(d log d + p) for d keys with pending changes holding p raw changes: one point read of each
such key's current row and of each of its pending changes, C1 and C3 in O(pending)
(:mod:`.fold`), and O(1 + pending) writes per key; keys with nothing pending are not touched.
A watermark is atomic: everything is computed before anything is written, so an ERROR conflict
leaves the state exactly as it was. No half-applied input: when a change or a watermark fails
half-way (a storage error, an interrupt during its commit), its writes are rolled back
(``backend.rollback()``) and the in-memory seqs, counters and watermark restored before the
error propagates, as the DEDUPLICATE strategies do.

``advance_time`` returns None (the ``Materializer`` contract); what a watermark emits is
collected and handed out by :meth:`CompactingMaterializer.take_emitted`;
:meth:`~CompactingMaterializer.watermark` does both.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator
from typing import NoReturn, Protocol, runtime_checkable

from ...spec import Change, Conflict, ConflictBehavior, ConflictError, Keys, Row, RowKind, canonical
from ..config import CONFLICT_STRATEGY, TTL, UnsupportedSetting
from ..settings import Settings
from ..state import CorruptStateError, StateBackend, open_backend
from ..state.codec import decode_seq, encode_seq
from ..state.errors import storage_failure
from .fold import cancel_pending, fold_pending

log = logging.getLogger("upsertmat")

CURRENT, PENDING, DIRTY, META = ("conflict-current", "conflict-pending", "conflict-dirty", "conflict-meta")
WATERMARK_KEY = b"watermark"


class CompactingMaterializer:
    """``ON CONFLICT DO ERROR | DO NOTHING`` over one :class:`StateBackend` (heap, rocksdb, lmdb).

    ``process`` buffers (rule C1) and returns None; ``advance_time(W)`` compacts when ``W`` is a
    new watermark (C2-C6). ``finish`` compacts at the end of the input. ``skip_conflicts``
    (settable): a conflict under ERROR keeps the key's current row, drops its pending changes
    and is appended to ``conflicts`` instead of raising :class:`ConflictError`.
    """

    def __init__(self, keys: Keys, backend: StateBackend, behavior: ConflictBehavior) -> None:
        if not behavior.compacting:
            raise ValueError("CompactingMaterializer implements ERROR and NOTHING, not DEDUPLICATE")
        self.keys = keys
        self.backend = backend
        self.behavior = behavior
        self.skip_conflicts = False
        self.conflicts: list[Conflict] = []
        self.retract_misses = 0
        self._emitted: list[Change] = []
        self._current = backend.value_state(CURRENT)
        self._pending = backend.map_state(PENDING)
        self._dirty = backend.value_state(DIRTY)
        self._meta = backend.value_state(META)
        try:
            stored = self._meta.get(WATERMARK_KEY)
            # The seqs of every key's pending changes since the last watermark (storage keys, in
            # order): the dirty index and the pending map read once, on open.
            self._seqs: dict[bytes, list[bytes]] = {
                context: sorted(seq for seq, _ in self._pending.items(context))
                for context in self._dirty.contexts()
            }
        except BaseException as error:
            _raise_classified(backend, error)
        self._watermark: int | None = None if stored is None else int(stored)
        self._seq = 1 + max((decode_seq(seqs[-1]) for seqs in self._seqs.values() if seqs), default=-1)

    @property
    def now(self) -> int:
        """The last watermark (0 before any)."""
        return 0 if self._watermark is None else self._watermark

    def process(self, change: Change) -> None:
        """Rule C1: buffer the change (cancellation happens at the key's compaction). Emits nothing.

        The change is committed before returning; if anything raises half-way (a storage
        error, an interrupt during the commit), every write of it is rolled back and the
        error propagates (a storage engine's error classified), as for DEDUPLICATE."""
        row = change.row
        context = self.keys.context_key(row)
        number = self._seq
        seq = encode_seq(number)
        seqs = self._seqs.get(context)
        try:
            self._pending.put(context, seq, [change.kind.is_add, list(row)])
            if seqs is None:
                self._dirty.put(context, 1)
                self._seqs[context] = [seq]
            else:
                seqs.append(seq)
            self._seq = number + 1
            self.backend.commit()
        except BaseException as error:
            self.backend.rollback()
            self._seq = number
            if seqs is None:
                self._seqs.pop(context, None)
            elif seqs and seqs[-1] == seq:
                seqs.pop()
            _raise_classified(self.backend, error)

    def advance_time(self, now: int) -> None:
        """A watermark when ``now`` is newer than the last one: compact every key with pending changes."""
        if self._watermark is not None and now <= self._watermark:
            return
        self._compact_all(now)

    def finish(self) -> list[Change]:
        """The end of the input (the final watermark): compact everything; return what it emits."""
        self._compact_all(None)
        return self.take_emitted()

    def watermark(self, now: int) -> list[Change]:
        """``advance_time(now)`` and return what it emitted."""
        self.advance_time(now)
        return self.take_emitted()

    def take_emitted(self) -> list[Change]:
        """The changes emitted by watermarks since the last call, in order (then forgotten)."""
        emitted, self._emitted = self._emitted, []
        return emitted

    def _pending_of(self, context: bytes) -> list[tuple[bool, Row]]:
        """The key's pending changes after C1, in arrival order: one point read per change (the
        seqs are known), no scan — a RocksDB range scan would cross the deletion marks of the
        changes compacted before."""
        get = self._pending.get
        changes: list[tuple[bool, Row]] = []
        for seq in self._seqs.get(context, ()):
            value = get(context, seq)
            if value is None:
                key = context.decode("utf-8", "replace")
                raise CorruptStateError(f"state {PENDING!r} lacks a pending change of context key {key}")
            changes.append((bool(value[0]), tuple(value[1])))
        return cancel_pending(changes)

    def _outcome(self, context: bytes) -> tuple[Row | None, Change | None, int, Conflict | None]:
        """Rules C3-C6 for one key: (new current, emitted, misses, conflict)."""
        stored = self._current.get(context)
        current: Row | None = None if stored is None else tuple(stored)
        survivors, misses = fold_pending(current, self._pending_of(context), self.keys)
        if not survivors:
            return None, (None if current is None else Change(RowKind.DELETE, current)), misses, None
        first = survivors[0]
        if len(survivors) > 1:
            if self.behavior is ConflictBehavior.ERROR:
                return current, None, misses, Conflict(context, current, tuple(survivors))
            if current is not None:
                return current, None, misses, None
        if current is None:
            return first, Change(RowKind.INSERT, first), misses, None
        if canonical(first) == canonical(current):
            return current, None, misses, None
        return first, Change(RowKind.UPDATE_AFTER, first), misses, None

    def _compact_all(self, watermark: int | None) -> None:
        """Compact every key with pending changes (``watermark`` None: the end of the input).

        Atomic: every outcome is computed before anything is written (a conflict under ERROR
        raises with nothing changed), and if a write or the commit fails, the writes, the
        counters, the conflicts and emitted changes collected, the in-memory seqs and the
        watermark are all put back before the error propagates."""
        saved = (self.retract_misses, len(self.conflicts), len(self._emitted), self._seqs, self._seq)
        watermark_before = self._watermark
        try:
            # The keys with pending changes come from the in-memory copy of the dirty index: a
            # scan of the stored index would, on RocksDB, wade through the deletion marks of
            # every key compacted before (measured: 0.3 ops/ms at a watermark every 10 changes
            # on 1,000 keys).
            outcomes = [(context, self._outcome(context)) for context in sorted(self._seqs)]
            if not self.skip_conflicts:
                for _, (_, _, _, conflict) in outcomes:
                    if conflict is not None:
                        raise ConflictError(conflict)  # nothing written: the watermark did not happen
            seqs = self._seqs
            for context, (current, emitted, misses, conflict) in outcomes:
                if misses:
                    self.retract_misses += misses
                    log.warning(
                        "%d retraction(s) matched no row at compaction (context key %s)",
                        misses,
                        context.decode("utf-8", "replace"),
                    )
                if conflict is not None:
                    self.conflicts.append(conflict)
                if current is None:
                    self._current.delete(context)
                elif emitted is not None:
                    self._current.put(context, list(current))
                if emitted is not None:
                    self._emitted.append(emitted)
                for seq in seqs[context]:
                    self._pending.delete(context, seq)
                self._dirty.delete(context)
            self._seqs = {}
            self._seq = 0
            if watermark is not None:
                self._watermark = watermark
                self._meta.put(WATERMARK_KEY, watermark)
            self.backend.commit()
        except BaseException as error:
            self.backend.rollback()
            misses, conflicts, emitted_count, self._seqs, self._seq = saved
            self.retract_misses = misses
            del self.conflicts[conflicts:]
            del self._emitted[emitted_count:]
            self._watermark = watermark_before
            _raise_classified(self.backend, error)

    def export_keys(self) -> Iterator[tuple[bytes, Row | None, list[tuple[bool, Row]]]]:
        """Every key holding state, ascending: ``(context, current row or None, pending changes
        in arrival order)``. The backend-independent form of the state (migration, savepoints).
        A full scan."""
        contexts = set(self._current.contexts()) | set(self._dirty.contexts())
        for context in sorted(contexts):
            stored = self._current.get(context)
            yield context, (None if stored is None else tuple(stored)), self._pending_of(context)

    def import_keys(
        self, items: Iterable[tuple[bytes, Row | None, list[tuple[bool, Row]]]], watermark: int | None
    ) -> None:
        """Replace the state of each given key (as :meth:`export_keys` yields it) and set the
        last watermark; committed once at the end (all or nothing)."""
        saved = ({context: list(seqs) for context, seqs in self._seqs.items()}, self._seq, self._watermark)
        try:
            for context, current, pending in items:
                if current is None:
                    self._current.delete(context)
                else:
                    self._current.put(context, list(current))
                for seq in self._seqs.pop(context, ()):
                    self._pending.delete(context, seq)
                self._dirty.delete(context)
                seqs = [encode_seq(self._seq + offset) for offset in range(len(pending))]
                self._seq += len(pending)
                for seq, (is_add, row) in zip(seqs, pending, strict=True):
                    self._pending.put(context, seq, [is_add, list(row)])
                if pending:
                    self._seqs[context] = seqs
                    self._dirty.put(context, 1)
            self._watermark = watermark
            if watermark is None:
                self._meta.delete(WATERMARK_KEY)
            else:
                self._meta.put(WATERMARK_KEY, watermark)
            self.backend.commit()
        except BaseException as error:
            self.backend.rollback()
            self._seqs, self._seq, self._watermark = saved
            _raise_classified(self.backend, error)

    @property
    def last_watermark(self) -> int | None:
        """The last watermark, None before the first."""
        return self._watermark

    def stats(self) -> dict[str, int]:
        """``keys`` and ``rows`` (current rows; at most one per key), ``pending_keys`` (keys with
        buffered changes) and ``pending`` (buffered raw changes, before C1's cancellation). A
        full scan."""
        rows = sum(1 for _ in self._current.contexts())
        dirty = list(self._dirty.contexts())
        pending = sum(sum(1 for _ in self._pending.items(context)) for context in dirty)
        return {"keys": rows, "rows": rows, "pending_keys": len(dirty), "pending": pending}

    def commit(self) -> None:
        """A durability point: every change processed so far is durable when this returns
        (with ``execution.checkpointing.interval`` > 1 on rocksdb/lmdb; otherwise it is already).
        A storage failure raises classified (the state is then at the previous durable commit)."""
        try:
            self.backend.checkpoint()
        except BaseException as error:
            _raise_classified(self.backend, error)

    def close(self) -> None:
        """Commit what is pending (:meth:`commit`), then close the backend (releases a state
        directory's files and lock)."""
        try:
            self.commit()
        finally:
            self.backend.close()


def _raise_classified(backend: StateBackend, error: BaseException) -> NoReturn:
    """Raise ``error``, a storage engine's error as its classified StateError."""
    failure = storage_failure(backend, error)
    if failure is None or failure is error:
        raise error
    raise failure from error


def create(keys: Keys, settings: Settings) -> CompactingMaterializer:
    """The compacting materializer of ``settings.conflict`` on ``settings.backend`` (any strategy).

    UnsupportedSetting when state TTL is on: the compacting state is bounded by the watermark
    already, and expiry of a current row is not part of the behaviours' semantics.
    """
    if settings.ttl.enabled:
        raise UnsupportedSetting(
            f"{TTL} is not supported with {CONFLICT_STRATEGY}={settings.conflict.value}: the state "
            "is bounded by the watermarks already (set the TTL to 0, or use DEDUPLICATE)"
        )
    backend = open_backend(settings)
    try:
        return CompactingMaterializer(keys, backend, settings.conflict)
    except BaseException:
        with contextlib.suppress(Exception):  # the error that matters is the one raised
            backend.close()
        raise


@runtime_checkable
class Compacting(Protocol):
    """What a driver (``upsertmat replay``) needs of a compacting materializer beyond ``Materializer``.

    After ``advance_time``, :meth:`take_emitted` hands out what the watermark emitted;
    :meth:`finish` compacts at the end of the input. With ``skip_conflicts`` set, conflicts
    are appended to ``conflicts`` (the driver drains and reports them) instead of raised.
    """

    skip_conflicts: bool
    conflicts: list[Conflict]

    def take_emitted(self) -> list[Change]: ...

    def finish(self) -> list[Change]: ...
