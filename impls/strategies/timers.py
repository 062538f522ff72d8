r"""The TTL timer index: when each stored stamp expires, in expiry order, over any backend.

One ordered map state ``ttl_timers`` under the empty context key holds one entry per write
of a stamp: ``encode_seq(expiry) + encode_seq(seq) + context -> 0`` where ``expiry = stamp +
ttl``, ``seq`` names the element inside its key (0 where a strategy has no element ids: VALUE
records, LEGACY's per-key stamp). Entries iterate in expiry order, so the due ones are a
prefix. A context longer than ``LONG_CONTEXT`` bytes (or starting with 0xff, which no UTF-8
context does) is written as ``encode_seq(expiry) + encode_seq(seq) + b"\xff" + SHA-256(context)
-> context`` instead, so timer keys stay short enough for every backend (LMDB limits keys to
511 bytes); a stored value of 0 still means the context is the key's tail, so timers written
before keep working. Only the order among timers of one expiry and seq differs between the two
forms, and it does not matter: a fired timer only removes expired elements of its own
context and emits nothing.

A timer is a hint, never a fact: when it fires the strategy re-checks the element's
*current* stamp (it may have been re-stamped, removed, or its seq reused) and removes only
what is really expired — so stale timers are harmless and need no deletion.

Cost: one write per stamp written (append, re-stamp), one seek + one delete per timer fired;
each timer fires once, so expiry is O(1) state accesses amortised per write (heap: O(log T)
for T timers; byte backends: an LSM/B-tree write). Seeks resume just past the last timer
fired (every smaller key is known to be gone), so they never step over the deleted head of
the queue again — on RocksDB a seek from the start would cross every tombstone of a fired
timer not yet compacted away, making each seek O(timers fired so far).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from ..state import CorruptStateError, StateBackend
from ..state.codec import decode_seq, encode_seq

_GLOBAL = b""
LONG_CONTEXT = 256
"""Contexts up to this many bytes are the tail of their timer key; longer ones are hashed."""
_HASHED = b"\xff"  # the tail of a hashed timer key starts with this byte; no plain tail does


class Timers:
    """The ``ttl_timers`` state of one backend."""

    def __init__(self, backend: StateBackend) -> None:
        self._state = backend.sorted_map_state("ttl_timers")
        # The earliest pending expiry (a lower bound of it; None: unknown).
        self._next_due: int | None = None
        # Invariant: no timer key below ``_resume`` exists; None: seek from the start.
        self._resume: bytes | None = None

    def add(self, expiry: int, context: bytes, seq: int = 0) -> None:
        """Fire at ``expiry`` for element ``seq`` of ``context``. One write."""
        key = encode_seq(expiry) + encode_seq(seq)
        if len(context) <= LONG_CONTEXT and not context.startswith(_HASHED):
            key += context
            self._state.put(_GLOBAL, key, 0)
        else:
            key += _HASHED + hashlib.sha256(context).digest()
            self._state.put(_GLOBAL, key, context)
        if self._next_due is not None and expiry < self._next_due:
            self._next_due = expiry
        if self._resume is not None and key < self._resume:
            self._resume = key

    def pop_due(self, now: int, budget: int = 0) -> Iterator[tuple[bytes, int]]:
        """Remove and yield ``(context, seq)`` of the timers with ``expiry <= now``, earliest first:
        every one, or at most ``budget`` of them when ``budget > 0`` (the rest stay for a later
        call, and :meth:`has_due` then says so without an access).

        One seek per timer plus one for the first not fired; the caller may write state between
        items (each item is deleted before it is yielded). No access at all while ``now`` is
        below the earliest expiry seen by the last call (kept in memory; a seek after a restart).
        """
        if self._next_due is not None and now < self._next_due:
            return
        fired = 0
        while True:
            if self._resume is None:
                first = self._state.first(_GLOBAL)
            else:
                first = self._state.ceiling(_GLOBAL, self._resume)
            if first is None or decode_seq(first[0][:8]) > now:
                self._next_due = 2**63 - 1 if first is None else decode_seq(first[0][:8])
                return
            if fired == budget and budget:  # the budget is spent; this due timer is the earliest
                self._next_due = decode_seq(first[0][:8])
                return
            fired += 1
            key, stored = first
            context = _context(key, stored)
            self._state.delete(_GLOBAL, key)
            self._resume = key + b"\x00"  # the smallest key above the one just deleted
            yield context, decode_seq(key[8:16])

    def has_due(self, now: int) -> bool:
        """True if a timer with ``expiry <= now`` is pending (an earlier :meth:`pop_due` left
        it, or it was just added). No access while the earliest expiry is known (the usual
        case); one seek after a restart or a rollback."""
        if self._next_due is None:
            if self._resume is None:
                first = self._state.first(_GLOBAL)
            else:
                first = self._state.ceiling(_GLOBAL, self._resume)
            self._next_due = 2**63 - 1 if first is None else decode_seq(first[0][:8])
        return now >= self._next_due

    def forget_hints(self) -> None:
        """Drop the in-memory hints (after a rollback they may describe writes that were undone)."""
        self._next_due = None
        self._resume = None

    def count(self) -> int:
        """Pending timers (a scan)."""
        return sum(1 for _ in self._state.items(_GLOBAL))

    def clear(self) -> None:
        """Drop every timer (before re-registering a whole imported state)."""
        self._state.clear(_GLOBAL)
        self._next_due = None
        self._resume = None


def _context(key: bytes, stored: object) -> bytes:
    """The context of a timer: the key's tail (value 0), or the stored one of a hashed key."""
    if stored == 0:
        return key[16:]
    if isinstance(stored, bytes) and key[16:] == _HASHED + hashlib.sha256(stored).digest():
        return stored
    raise CorruptStateError(f"damaged state: state 'ttl_timers': timer {key!r} holds {stored!r}")
