"""Commit intervals of the byte backends (rocksdb, lmdb): one durable commit per N units.

A strategy calls ``backend.commit()`` once per *unit*: an input fully applied (or an
``advance_time`` that expired state, or an import). With ``commit_interval`` 1 (the library
default) every unit is written durably at once, as it always was. With an interval N > 1 (the
config key ``execution.checkpointing.interval``) ``commit()`` only ends the unit, and every
N-th one writes the units since the last durable commit in one atomic batch;
:meth:`DeferredCommits.checkpoint` writes them at once (a durability point: the
materializer's ``commit()`` and ``close()``). While an owner *holds* the commits
(``defer_commits``: ``replay --state-dir``, which adds its stream position to the batch and
calls ``checkpoint`` at its own commit points), no unit is written by itself.

**Per-unit rollback.** While units are deferred, a unit that raises half-way must not take the
earlier, successful units with it. Every write therefore first appends an undo record to
:attr:`DeferredCommits.journal` — ``(owner, context, key, previous)``, the interface of the
heap backend's journal (``owner.undo(context, key, previous)`` puts back what one write
replaced); ``commit()`` empties it (the mark moves to the start of the next unit) and
``rollback()`` replays it backwards, undoing exactly the writes of the failed unit. With
interval 1 and no hold the journal is ``None``: no record is made and ``rollback()`` drops
everything uncommitted, as before (one attribute test per write is the whole price).

A storage failure while writing a batch (a full disk, an I/O error) leaves the database at its
previous durable commit: the units of that batch are lost as in a crash, and the error says
so only through its type (:mod:`.errors`); reopen the state before going on.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

Journal = list[tuple[Any, bytes, Any, Any]]
"""Undo records ``(owner, context, key or None, previous)``; see the module docstring."""

ABSENT: Any = object()
"""An undo record's ``previous`` when the write found nothing there."""


@mypyc_attr(allow_interpreted_subclasses=True)
class DeferredCommits:
    """The commit-interval half of a byte backend; the backend supplies ``_write`` (write every
    pending change durably, atomically) and ``_discard`` (drop every pending change)."""

    journal: Journal | None = None
    """The undo records of the current unit while units are deferred, else None."""
    durable_commits = 0
    """Durable commits written (``_write`` calls) since the backend opened."""
    _interval = 1
    _held = False
    _units = 0
    """Units ended since the last durable commit (0 while every unit is written at once)."""

    def _write(self) -> None:  # pragma: no cover - every backend overrides it
        raise NotImplementedError

    def _discard(self) -> None:  # pragma: no cover - every backend overrides it
        raise NotImplementedError

    @property
    def commit_interval(self) -> int:
        """Units per durable commit (>= 1)."""
        return self._interval

    @commit_interval.setter
    def commit_interval(self, interval: int) -> None:
        if interval < 1:
            raise ValueError(f"a commit interval is at least 1, got {interval}")
        self._interval = interval
        self._journaling()

    @property
    def defer_commits(self) -> bool:
        """While True no unit is written by itself: only :meth:`checkpoint` (called by the owner
        once it is False again) writes; ``replay`` adds its position to the same batch."""
        return self._held

    @defer_commits.setter
    def defer_commits(self, held: bool) -> None:
        self._held = held
        self._journaling()

    def _journaling(self) -> None:
        if self._held or self._interval > 1:
            if self.journal is None:
                self.journal = []
        else:
            self.journal = None

    @property
    def pending_units(self) -> int:
        """Units ended but not yet durable."""
        return self._units

    def commit(self) -> None:
        """The end of one unit: written durably now with interval 1, else at the interval's
        next durable commit (or :meth:`checkpoint`)."""
        journal = self.journal
        if journal is None:
            self._write()
            return
        self._units += 1
        if self._held or self._units < self._interval:
            journal.clear()
            return
        self._write_now()

    def checkpoint(self) -> None:
        """Write every write so far durably now and end the current unit (called between
        inputs; no-op while held, nothing written when nothing is pending)."""
        if not self._held:
            self._write_now()

    def _write_now(self) -> None:
        if self.journal is not None:
            self.journal.clear()  # a failed write leaves the last durable commit: nothing to undo
        try:
            self._write()
        finally:
            self._units = 0

    def rollback(self) -> None:
        """Undo the writes of the current unit (deferred units), or every uncommitted write."""
        journal = self.journal
        if journal is None:
            self._discard()
            return
        while journal:
            owner, context, key, previous = journal.pop()
            owner.undo(context, key, previous)
