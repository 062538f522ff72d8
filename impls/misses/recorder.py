"""What a materializer keeps about its misses: explanations not yet taken, and expired keys.

A strategy holds one :class:`MissRecorder` when ``upsertmat.misses.max-rows`` > 0. Nothing here
runs for an input that matches a stored row: a miss adds one explanation (O(1)); a TTL expiry
that removes rows of a key notes the key (O(1)), so that a later miss on a key left empty can
say whether its rows expired. Memory is bounded: at most :data:`MAX_PENDING` explanations wait
to be taken (older ones are folded into the summary and dropped) and at most
:data:`MAX_EXPIRED_KEYS` keys are remembered as expired (the oldest noted are forgotten first;
a miss on a forgotten key then says ``never_added``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from ...spec.misses import MissExplanation
from .summary import MissSummary

MAX_PENDING = 10_000
"""Explanations kept until :meth:`MissRecorder.take` (the newest; older ones only counted)."""

MAX_EXPIRED_KEYS = 65_536
"""Context keys remembered as having had rows expire by TTL."""


class MissRecorder:
    """The explanations of one materializer's misses, and the keys whose rows expired.

    ``max_rows``: how many stored rows of its key a miss reads at most (the newest).
    :attr:`summary` counts every explanation recorded since the recorder was made (this
    process); :meth:`take` hands out and forgets the pending ones.
    """

    def __init__(self, max_rows: int) -> None:
        if max_rows <= 0:
            raise ValueError(f"max_rows must be > 0, got {max_rows}")
        self.max_rows = max_rows
        self._pending: list[MissExplanation] = []
        self._folded = 0  # pending[:folded] are in the summary already
        self._summary = MissSummary()
        self._expired: OrderedDict[bytes, int] = OrderedDict()
        self.fallback: Callable[[bytes], int] | None = None
        """Where :meth:`expired` looks for a key not noted here (a driver that keeps expiry notes
        beyond this object's life: the Spark processor's per-key state)."""

    def record(self, explanation: MissExplanation) -> None:
        """Keep one explanation (the newest). Amortised O(1)."""
        pending = self._pending
        pending.append(explanation)
        if len(pending) > MAX_PENDING:
            # Fold and drop the older half; never the newest, which a rollback may discard.
            half = len(pending) // 2
            self._fold(half)
            del pending[:half]
            self._folded -= half

    def discard_last(self) -> None:
        """Forget the newest explanation: its input was rolled back (it never happened)."""
        if self._pending and self._folded < len(self._pending):
            self._pending.pop()

    def _fold(self, upto: int) -> None:
        for explanation in self._pending[self._folded : upto]:
            self._summary.add(explanation)
        self._folded = max(self._folded, upto)

    def take(self) -> list[MissExplanation]:
        """The pending explanations, oldest first, and forget them (they stay counted)."""
        self._fold(len(self._pending))
        taken, self._pending, self._folded = self._pending, [], 0
        return taken

    @property
    def summary(self) -> MissSummary:
        """Counters over every explanation recorded (pending ones included)."""
        self._fold(len(self._pending))
        return self._summary

    def note_expired(self, context: bytes, count: int = 1) -> None:
        """TTL expiry removed ``count`` rows (or the whole history) of ``context``. O(1)."""
        expired = self._expired
        expired[context] = expired.pop(context, 0) + count
        if len(expired) > MAX_EXPIRED_KEYS:
            expired.popitem(last=False)

    def expired(self, context: bytes) -> int:
        """Expiry removals noted for ``context`` (0 if none, or forgotten); a key not noted here
        is looked up in :attr:`fallback`, if set (only on a miss)."""
        count = self._expired.get(context, 0)
        if not count and self.fallback is not None:
            return self.fallback(context)
        return count

    def noted(self) -> dict[bytes, int]:
        """The expiry removals noted here, per key (for a driver to keep them)."""
        return dict(self._expired)
