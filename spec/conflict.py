"""The reference model of ``ON CONFLICT DO ERROR | DO NOTHING``: watermark compaction.

Rules 1-11 (:mod:`.model`) are ``ON CONFLICT DO DEDUPLICATE``: the full history per key and an
answer to every input at once. The two compacting behaviours keep, per sink key, only
``current`` (the row the sink shows, or None) and ``pending`` (the changes since the last
compaction, in arrival order), so state stays bounded. The rules, C1-C6:

- **C1 (buffer).** An input change emits nothing. An ADD cancels the first pending RETRACT of the
  identical whole row (both disappear), otherwise it is appended to ``pending``; a RETRACT
  cancels the first pending ADD of the identical whole row, otherwise it is appended.
  "Identical" is canonical (type-exact) equality of whole rows, even with an upsert key.
- **C2 (watermark).** A watermark is a time line ``{"time": W}`` with ``W`` greater than every
  earlier one (the first one always counts); an older or equal time changes nothing. At a
  watermark every key with pending changes is compacted, in ascending byte order of the
  canonical context key, so the output is deterministic. The end of the input is the final
  watermark (Flink's MAX_WATERMARK): :meth:`ConflictModel.finish`.
- **C3 (fold).** Compaction starts from ``[current]`` (or ``[]``) and applies each pending
  change in order with the list rules: ADD with an upsert key replaces the first match (rule
  2) in place, otherwise appends; RETRACT removes the first match (rule 2); a RETRACT that
  matches nothing is a miss (counted, logged, nothing else). ``pending`` becomes empty.
- **C4 (emit).** With ``survivors`` the resulting list: none -> ``-D`` of the stored
  ``current`` if there was one (else nothing); one -> ``+I`` of it if there was no
  ``current``, ``+U`` of it if it differs (canonically) from ``current``, nothing if equal.
- **C5 (conflict, ERROR).** Two or more survivors under ERROR: the watermark fails with
  :class:`ConflictError` naming the key, ``current`` and the survivors. The model is atomic:
  a failed watermark changes no state at all (no key is compacted).
- **C6 (conflict, NOTHING).** Two or more survivors under NOTHING: keep ``current`` unchanged
  (nothing emitted); if there was none, ``+I`` the first survivor, which becomes ``current``.

After a compaction a key holds at most one row and no pending change; a key with neither
``current`` nor pending changes holds no state at all.

Written to be obviously right, not fast: plain lists, O(pending x survivors) per key.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from .changes import Change, Row, RowKind
from .encoding import canonical
from .keys import Keys

log = logging.getLogger("upsertmat")

PendingChange = tuple[bool, Row]
"""A buffered change: ``(is_add, row)`` (rule 1: only ADD or RETRACT matters)."""


class ConflictBehavior(enum.Enum):
    """``table.exec.sink.conflict-strategy``: what to do when a key holds two live rows."""

    DEDUPLICATE = "DEDUPLICATE"
    ERROR = "ERROR"
    NOTHING = "NOTHING"

    @property
    def compacting(self) -> bool:
        """True for ERROR and NOTHING (the bounded-state, watermark-compacting behaviours)."""
        return self is not ConflictBehavior.DEDUPLICATE


@dataclass(frozen=True)
class Conflict:
    """Two or more rows survived a compaction under ERROR (rule C5)."""

    context: bytes
    current: Row | None
    survivors: tuple[Row, ...]

    def describe(self) -> str:
        """One line naming the key, the current row and the conflicting rows."""
        shown = ", ".join(repr(list(row)) for row in self.survivors)
        current = "none" if self.current is None else repr(list(self.current))
        return (
            f"Primary key constraint violation: sink key {self.context.decode('utf-8', 'replace')} "
            f"has {len(self.survivors)} live rows at the watermark: {shown} (current row: {current})"
        )


class ConflictError(Exception):
    """A watermark found a conflict under ``ON CONFLICT DO ERROR``; ``conflict`` says where."""

    def __init__(self, conflict: Conflict) -> None:
        super().__init__(conflict.describe())
        self.conflict = conflict


def buffer_change(pending: list[PendingChange], change: Change) -> None:
    """Rule C1: add ``change`` to one key's ``pending`` in place (cancel or append). O(pending)."""
    is_add = change.kind.is_add
    wanted = canonical(change.row)
    for index, (pending_add, row) in enumerate(pending):
        if pending_add != is_add and canonical(row) == wanted:
            del pending[index]
            return
    pending.append((is_add, change.row))


def fold(current: Row | None, pending: Iterable[PendingChange], keys: Keys) -> tuple[list[Row], int]:
    """Rule C3: the survivors of ``[current]`` after ``pending``, and how many RETRACTs missed."""
    rows: list[Row] = [] if current is None else [current]
    misses = 0
    for is_add, row in pending:
        wanted = keys.match_key(row)
        position = next((i for i, stored in enumerate(rows) if keys.match_key(stored) == wanted), None)
        if is_add:
            if keys.has_upsert_key and position is not None:
                rows[position] = row
            else:
                rows.append(row)
        elif position is None:
            misses += 1
        else:
            del rows[position]
    return rows, misses


@dataclass(frozen=True)
class Compaction:
    """What compacting one key gives: the new ``current``, what to emit, misses, a conflict."""

    current: Row | None
    emitted: Change | None
    misses: int
    conflict: Conflict | None = None


def compact(
    context: bytes,
    current: Row | None,
    pending: Iterable[PendingChange],
    keys: Keys,
    behavior: ConflictBehavior,
) -> Compaction:
    """Rules C3-C6 for one key. Under ERROR a conflict keeps ``current`` and reports itself."""
    survivors, misses = fold(current, pending, keys)
    if not survivors:
        emitted = None if current is None else Change(RowKind.DELETE, current)
        return Compaction(None, emitted, misses)
    if len(survivors) == 1:
        (row,) = survivors
        if current is None:
            return Compaction(row, Change(RowKind.INSERT, row), misses)
        if canonical(row) != canonical(current):
            return Compaction(row, Change(RowKind.UPDATE_AFTER, row), misses)
        return Compaction(current, None, misses)
    if behavior is ConflictBehavior.ERROR:
        return Compaction(current, None, misses, Conflict(context, current, tuple(survivors)))
    if current is None:  # NOTHING, no current: the first survivor wins
        return Compaction(survivors[0], Change(RowKind.INSERT, survivors[0]), misses)
    return Compaction(current, None, misses)  # NOTHING: keep the sink as it is


class ConflictModel:
    """The compacting behaviours over many context keys (rules C1-C6).

    ``process`` buffers and returns None (nothing is emitted before a watermark);
    ``advance_time`` is the watermark and returns the emitted changes, ascending by context
    key. ``skip_conflicts``: instead of raising, a conflict keeps ``current``, clears the key's
    pending changes and is appended to ``conflicts`` (what ``--on-error skip`` dead-letters).
    """

    def __init__(
        self,
        keys: Keys,
        behavior: ConflictBehavior = ConflictBehavior.NOTHING,
        *,
        skip_conflicts: bool = False,
    ) -> None:
        if not behavior.compacting:
            raise ValueError("ConflictModel models ERROR and NOTHING; DEDUPLICATE is ModelMaterializer")
        self.keys = keys
        self.behavior = behavior
        self.skip_conflicts = skip_conflicts
        self.retract_misses = 0
        self.last_watermark: int | None = None
        self.conflicts: list[Conflict] = []
        self.current: dict[bytes, Row] = {}
        self.pending: dict[bytes, list[PendingChange]] = {}

    def process(self, change: Change) -> None:
        """Rule C1 for one input. Emits nothing."""
        context = self.keys.context_key(change.row)
        pending = self.pending.setdefault(context, [])
        buffer_change(pending, change)

    def advance_time(self, now: int) -> list[Change]:
        """Rule C2: a watermark if ``now`` is newer than the last one, else nothing happens."""
        if self.last_watermark is not None and now <= self.last_watermark:
            return []
        emitted = self._compact_all()
        self.last_watermark = now
        return emitted

    def finish(self) -> list[Change]:
        """The end of the input: the final watermark, compacting everything pending."""
        return self._compact_all()

    def _compact_all(self) -> list[Change]:
        results = [
            (context, compact(context, self.current.get(context), pending, self.keys, self.behavior))
            for context, pending in sorted(self.pending.items())
        ]
        conflicts = [result.conflict for _, result in results if result.conflict is not None]
        if conflicts and not self.skip_conflicts:
            raise ConflictError(conflicts[0])  # rule C5: nothing changed
        emitted: list[Change] = []
        for context, result in results:
            self.retract_misses += result.misses
            if result.misses:
                log.warning(
                    "%d retraction(s) matched no row at compaction (context key %s)",
                    result.misses,
                    context.decode("utf-8", "replace"),
                )
            if result.conflict is not None:
                self.conflicts.append(result.conflict)
            if result.current is None:
                self.current.pop(context, None)
            else:
                self.current[context] = result.current
            if result.emitted is not None:
                emitted.append(result.emitted)
        self.pending.clear()
        return emitted

    def stats(self) -> dict[str, int]:
        """``keys`` (with a current row), ``rows`` (current rows), ``pending_keys``, ``pending``."""
        return {
            "keys": len(self.current),
            "rows": len(self.current),
            "pending_keys": sum(1 for pending in self.pending.values() if pending),
            "pending": sum(map(len, self.pending.values())),
        }

    def close(self) -> None:
        """Nothing to release; part of the contract."""


def run_conflict_model(
    keys: Keys,
    lines: Iterable[Change | int],
    behavior: ConflictBehavior = ConflictBehavior.NOTHING,
    *,
    finish: bool = True,
) -> list[list[Change]]:
    """Per input line (a change, or an ``int`` watermark) the emitted changes; with ``finish``
    one more entry: what the end of the input emits. Raises ConflictError under ERROR.
    """
    model = ConflictModel(keys, behavior)
    out: list[list[Change]] = []
    for line in lines:
        if isinstance(line, Change):
            model.process(line)
            out.append([])
        else:
            out.append(model.advance_time(line))
    if finish:
        out.append(model.finish())
    return out
