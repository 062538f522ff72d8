"""Checks of a program under test (``protocol.Program``) against the model, input by input.

A program is slow to start (a JVM takes seconds), so one run feeds many streams: a *batch*
concatenates streams one after the other on disjoint sink keys. With more than one stream,
the first sink-key column of stream ``i`` is rewritten to the string ``"i|<JSON of the
value>"`` (an injective map: rows equal before are equal after, keys stay apart), and a timed
stream's clock and timestamps are shifted past everything before it (preceded by one clock
line), so no stream sees another's state or time. The model runs on exactly the batch the
program gets, so the comparison needs no assumption about that rewriting; a mismatch is
reported for its own stream, with that stream's original inputs and rows (the rewriting
undone), and Hypothesis shrinks the batch to the one failing stream (a batch of one stream is
fed unchanged). Split runs cut the batch into several runs over one ``{STATE}`` directory.

Per input, the outputs naming it (``in``) must equal the model's exactly (op, row with exact
JSON types, at most one). ``retract_misses`` is not part of the protocol and is not compared.
Cost: one model pass and one program run (or one per split part) per batch.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...spec import Change, Granularity, JsonValue, Keys, ModelMaterializer, RowKind, TtlSettings
from ..generators import Advance, Step
from ..mismatch import Mismatch
from ..protocol import Output, Program, as_output, by_input, state_directory, ttl_flags

SHIFT_GAP = 1000
"""Clock distance between two timed streams of a batch (far beyond the suite's TTL of 5 ms)."""


@dataclass
class Batch:
    """Streams of one ``Keys`` concatenated into one input (see the module docstring)."""

    keys: Keys
    labels: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    origin: list[tuple[int, int | None]] = field(default_factory=list)
    """Per batch input: (stream number, index in that stream, None for an inserted clock line)."""
    originals: list[tuple[Step, ...]] = field(default_factory=list)
    unmap: list[dict[str, JsonValue]] = field(default_factory=list)
    tags: list[int] = field(default_factory=list)
    """Per stream: the number its rewritten keys carry."""

    clock: int = 0
    """The greatest time (clock line or ``ts``) in the batch, or the starting clock."""

    @classmethod
    def of(
        cls,
        keys: Keys,
        streams: Sequence[tuple[str, Sequence[Step]]],
        timed: bool,
        *,
        first: int = 0,
        clock: int = 0,
        rewrite: bool | None = None,
    ) -> Batch:
        """Concatenate ``(label, steps)`` streams; rewrite keys and clocks when there are several.

        ``first`` numbers the first stream (the tag in rewritten keys), ``clock`` is the time the
        program has already seen, ``rewrite`` forces the key rewriting on or off.
        """
        batch = cls(keys)
        rewrite = len(streams) > 1 if rewrite is None else rewrite
        for offset, (label, steps) in enumerate(streams):
            number = first + offset
            batch.labels.append(label)
            batch.originals.append(tuple(steps))
            batch.unmap.append({})
            batch.tags.append(number)
            base = clock + SHIFT_GAP if rewrite and timed and (offset or clock) else 0
            if base:
                batch.steps.append(Advance(base))
                batch.origin.append((offset, None))
                clock = base
            for index, step in enumerate(steps):
                if isinstance(step, Advance):
                    moved: Step = Advance(step.time + base)
                    clock = max(clock, step.time + base)
                else:
                    row = step.row
                    if rewrite:
                        row = batch.rewrite(offset, row)
                    ts = None if step.ts is None else step.ts + base
                    if ts is not None:
                        clock = max(clock, ts)
                    moved = Change(step.kind, row, ts)
                batch.steps.append(moved)
                batch.origin.append((offset, index))
        batch.clock = clock
        return batch

    def rewrite(self, offset: int, row: tuple[JsonValue, ...]) -> tuple[JsonValue, ...]:
        """``row`` of the batch's stream ``offset`` with its first key column on the stream's own keys."""
        column = self.keys.pk[0]
        text = f"{self.tags[offset]}|{json.dumps(row[column])}"
        self.unmap[offset][text] = row[column]
        return (*row[:column], text, *row[column + 1 :])

    def restore(self, number: int, output: Output) -> str:
        """An output row of stream ``number`` as that stream wrote it (the rewriting undone)."""
        row: list[JsonValue] = list(output.row)
        column = self.keys.pk[0]
        value = row[column] if column < len(row) else None
        if isinstance(value, str) and value in self.unmap[number]:
            row[column] = self.unmap[number][value]
        return f"{output.op}{json.dumps(row, ensure_ascii=False)}"


def model_outputs(
    keys: Keys, steps: Sequence[Step], ttl: TtlSettings | None, granularity: Granularity
) -> list[list[Output]]:
    """The model's output for every input (``[]`` for clock lines)."""
    model = ModelMaterializer(keys, ttl, granularity)
    expected: list[list[Output]] = []
    for index, step in enumerate(steps):
        if isinstance(step, Advance):
            model.advance_time(step.time)
            expected.append([])
        else:
            expected.append(as_output(model.process(step), index))
    return expected


def _history(steps: Sequence[Step], upto: int) -> str:
    lines = [f"  [{i}] {step!r}" for i, step in enumerate(steps) if i <= upto]
    return "\n".join(lines[-12:])


def compare(
    batch: Batch,
    expected: Sequence[Sequence[Output]],
    actual: Sequence[Output],
    command: str,
    what: str,
    ttl: TtlSettings | None = None,
    granularity: Granularity = Granularity.PER_ELEMENT,
) -> None:
    """The first input whose outputs differ fails (a :class:`Mismatch`) for its own stream."""
    __tracebackhide__ = True
    got = by_input(actual)
    for index, want in enumerate(expected):
        have = got.get(index, [])
        if [o.exact() for o in have] == [o.exact() for o in want]:
            continue
        number, position = batch.origin[index]
        stream = batch.originals[number]
        shown_want = [batch.restore(number, o) for o in want] or "nothing"
        shown_have = [batch.restore(number, o) for o in have] or "nothing"
        place = (
            f"input [{position}] {stream[position]!r}"
            if position is not None
            else f"the clock line {batch.steps[index]!r} before the stream"
        )
        if len(batch.labels) > 1:
            where = f"stream {number + 1} of {len(batch.labels)} fed in one run (disjoint sink keys)"
        elif batch.unmap[0]:
            where = "the stream (fed to a running program on sink keys of its own; rows as generated)"
        else:
            where = "the stream"
        raise Mismatch(
            f"{what}: {where}, {place}: expected {shown_want}, the program emitted {shown_have}\n"
            f"stream: {batch.labels[number]}\n"
            f"its inputs so far:\n{_history(stream, position if position is not None else -1)}\n"
            f"program: {command}",
            keys=batch.keys,
            steps=batch.steps[: index + 1],
            actual_ops=[o.op for o in have],
            actual=_changes(have),
            expected=_changes(want),
            ttl=ttl,
            granularity=granularity,
            program=True,
        )


def _changes(outputs: Sequence[Output]) -> list[Change] | None:
    """Outputs as changes, or None when one has an op that is no change kind (rule 11)."""
    try:
        return [Change(RowKind.parse(output.op), output.row) for output in outputs]
    except ValueError:
        return None


def run_program(
    program: Program, batch: Batch, settings: dict[str, str], cuts: Sequence[int] = ()
) -> list[Output]:
    """One run of the whole batch, or (``cuts``) consecutive runs over one state directory."""
    if not cuts:
        return program.run(batch.keys, batch.steps, settings)
    bounds = [0, *sorted(set(cuts)), len(batch.steps)]
    outputs: list[Output] = []
    with state_directory() as state:
        for start, stop in itertools.pairwise(bounds):
            outputs += program.run(batch.keys, batch.steps[start:stop], settings, state, first_index=start)
    return outputs


def check_program_streams(
    program: Program,
    streams: Sequence[tuple[Keys, str, Sequence[Step]]],
    *,
    ttl: TtlSettings | None = None,
    granularity: Granularity = Granularity.PER_ELEMENT,
    what: str = "generated streams",
    cut: Callable[[int], Sequence[int]] | None = None,
) -> None:
    """Feed ``(keys, label, steps)`` streams in one run per ``Keys`` and compare with the model.

    ``cut(n)`` (split runs) gives the positions where a batch of ``n`` inputs is cut into runs.
    """
    __tracebackhide__ = True
    groups: dict[Keys, list[tuple[str, Sequence[Step]]]] = {}
    for keys, label, steps in streams:
        groups.setdefault(keys, []).append((label, steps))
    timed = ttl is not None and bool(ttl.ttl_ms)
    settings = ttl_flags(ttl)
    for keys, members in groups.items():
        batch = Batch.of(keys, members, timed or any(isinstance(s, Advance) for _, st in members for s in st))
        expected = model_outputs(keys, batch.steps, ttl, granularity)
        cuts = cut(len(batch.steps)) if cut is not None else ()
        actual = run_program(program, batch, settings, cuts)
        compare(batch, expected, actual, program.command, what, ttl, granularity)


def check_program_scenario(
    program: Program,
    keys: Keys,
    name: str,
    steps: Sequence[Step],
    expected: Sequence[Change | None],
    ttl: TtlSettings | None = None,
) -> None:
    """One hand-written scenario in one run: every output exactly as written."""
    __tracebackhide__ = True
    batch = Batch.of(keys, [(f"scenario {name!r}", steps)], timed=False)
    want = [as_output(change, index) for index, change in enumerate(expected)]
    actual = run_program(program, batch, ttl_flags(ttl))
    compare(batch, want, actual, program.command, f"scenario {name!r}", ttl)
