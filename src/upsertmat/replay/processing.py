"""Processing one input line of ``upsertmat replay``: parse, check, materialize, emit.

:class:`LineProcessor` turns a line into what it means — a change fed to the materializer,
whose emitted change is written to the output; a clock line (a watermark under ``ON CONFLICT
DO ERROR | NOTHING``, whose compaction output is written); a blank line — and a bad line into
a :class:`~upsertmat.replay.jsonl.BadLine` (``--on-error fail``) or a dead letter (``skip``).
A line that raises has applied nothing: the materializer rolls a failed input back, and a
conflict at a watermark changes no state. A state restored as one instance of several (a
:class:`~upsertmat.impls.lifecycle.Partition`) applies only the changes of the key groups it
owns: the others are counted (``routed_elsewhere``) and not applied; clock lines apply to
every instance. Cost per line: the materializer's, plus O(length of the line) to parse and
format (and, for a partition, to hash its sink key).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from upsertmat.impls.conflict import Compacting
from upsertmat.impls.lifecycle import Partition
from upsertmat.spec import Change, ConflictError, Keys, Materializer, Row

from .jsonl import BadLine, ChangeLine, RowShape, format_change, parse_line
from .messages import SHOWN_MESSAGES, say
from .misses import MissReporter
from .sink import DeadLetters, Output


class ConflictAtWatermark(BadLine):
    """An ``ON CONFLICT DO ERROR`` conflict at a watermark (the time line is not applied)."""


@dataclass
class Counts:
    """What this run's lines did so far (this process only, not the stream before it)."""

    lines: int = 0
    """Lines applied (changes, clock, blank and skipped lines)."""
    emitted: int = 0
    skipped: int = 0
    misses: int = 0
    """Rule-7 retractions that matched nothing (at compactions too)."""
    routed_elsewhere: int = 0
    """Changes of key groups another instance owns, not applied (a partition only)."""


class LineProcessor:
    """Applies the lines of one run to ``materializer``; see the module docstring.

    ``fail``: a bad line (or a conflict at a watermark) raises BadLine; otherwise it goes to
    ``dead_letters``. ``need_ts``: every change must carry ``ts`` (event-time TTL). ``quiet``:
    no warnings. ``partition``: the key groups the state owns (None: all), with ``keys`` to
    route a change by its sink key. ``now`` is the greatest clock line seen (0 before any).
    """

    def __init__(
        self,
        materializer: Materializer,
        shape: RowShape,
        output: Output,
        dead_letters: DeadLetters,
        misses: MissReporter,
        *,
        fail: bool,
        need_ts: bool,
        quiet: bool,
        partition: Partition | None = None,
        keys: Keys | None = None,
    ) -> None:
        self.materializer = materializer
        self.shape = shape
        self.counts = Counts()
        self.now = 0
        self._output = output
        self._dead_letters = dead_letters
        self._misses = misses
        self._fail = fail
        self._need_ts = need_ts
        self._quiet = quiet
        self._routed: Callable[[Row], bool] | None = None
        if partition is not None:
            assert keys is not None, "a partition routes by the keys"
            owns, context_key = partition.owns, keys.context_key
            self._routed = lambda row: owns(context_key(row))
        self._compacting: Compacting | None = None
        if isinstance(materializer, Compacting):  # ON CONFLICT DO ERROR | NOTHING
            self._compacting = materializer
            materializer.skip_conflicts = not fail
        # Bound once: every line calls them.
        self._check = shape.check
        self._process = materializer.process
        self._write = output.write

    def line(self, raw: bytes, index: int, number: int) -> None:
        """Apply the line ``raw``: stream index ``index`` (its output's ``in``), line ``number``
        of this run's input (messages, dead letters). BadLine if it is bad (or a conflict at a
        watermark) and bad lines fail the run: then nothing of it was applied."""
        try:
            item = parse_line(raw)
            if isinstance(item, ChangeLine):
                change = item.change
                self._check(change.row)
                if self._need_ts and change.ts is None:
                    raise BadLine("event-time TTL needs a 'ts' on every change")
                if self._routed is not None and not self._routed(change.row):
                    self.counts.routed_elsewhere += 1
                    self.counts.lines += 1
                    return
                materializer = self.materializer
                misses = materializer.retract_misses
                emitted = self._process(change)
                if emitted is not None:
                    self._write(format_change(index, emitted).encode("utf-8"))
                    self.counts.emitted += 1
                elif materializer.retract_misses != misses:
                    self.miss(number, index, change, materializer)
            elif item is not None:
                if self._compacting is not None:
                    self._watermark(self._compacting, item.time, index, number, raw)
                else:
                    self.materializer.advance_time(item.time)
                if item.time > self.now:
                    self.now = item.time
        except BadLine as error:
            if self._fail:
                raise
            self.skip(number, index, str(error), raw)
        self.counts.lines += 1

    def final_watermark(self, index: int, number: int) -> None:
        """``ON CONFLICT DO ERROR | NOTHING`` without a state directory: the end of the input
        is the final watermark (outputs with ``in`` = ``index``, one past the last line).
        BadLine for a conflict when bad lines fail the run. Nothing to do otherwise."""
        if self._compacting is not None:
            self._watermark(self._compacting, None, index, number, b"")

    def _watermark(
        self, materializer: Compacting, time: int | None, index: int, number: int, raw: bytes
    ) -> None:
        """Compact at a watermark (``time`` None: the end of the input), write what it emits
        with ``in`` = ``index``, dead-letter skipped conflicts. A conflict with ``fail`` is a
        BadLine: the watermark changed no state."""
        misses = self.materializer.retract_misses
        try:
            if time is None:
                emitted = materializer.finish()
            else:
                self.materializer.advance_time(time)
                emitted = materializer.take_emitted()
        except ConflictError as error:
            raise ConflictAtWatermark(str(error)) from None
        self.counts.misses += self.materializer.retract_misses - misses
        for change in emitted:
            self._output.write(format_change(index, change).encode("utf-8"))
            self.counts.emitted += 1
        conflicts, materializer.conflicts = materializer.conflicts, []
        for conflict in conflicts:
            self.skip(number, index, f"{conflict.describe()}; the current row is kept", raw)

    def miss(self, number: int, index: int, change: Change, materializer: Materializer) -> None:
        """A retraction on line ``number`` (stream index ``index``) matched no stored row of
        ``materializer`` (rule 7): counted, explained (``--misses`` and the summary), and the
        first ones of the run reported. Only on a miss: inputs that match cost nothing here."""
        self.counts.misses += 1
        described = self._misses.explain(materializer, number, index, change)
        if not self._quiet and self.counts.misses <= SHOWN_MESSAGES:
            say(f"line {number}: warning: {described}")

    def skip(self, number: int, index: int, error: str, raw: bytes) -> None:
        """Dead-letter the bad line ``raw`` (or a conflict at the watermark ``raw``)."""
        self._dead_letters.write(number, index, error, raw)
        self.counts.skipped += 1
        if self.counts.skipped <= SHOWN_MESSAGES:
            say(f"line {number}: {error} (skipped)")
