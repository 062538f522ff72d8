"""Hypothesis strategies for changelog streams (docs/spec.md section 5 and rule 4).

Valid input is not an arbitrary permutation. A valid stream is built in two steps:

1. a *logically ordered* upstream changelog over a few sink keys (rows ``(pk, uk, level,
   payload)``: sink PK column 0, upsert key column 1 when there is one): inserts, updates as
   ``-U old``/``+U new`` pairs (or bare ``+U new`` in the upsert-style variant), deletes and
   re-inserts;
2. each change is routed to one of 1-4 parallel channels and the channels are merged in any
   interleaving that keeps each channel's order. Routing is the guarantee of docs/spec.md section
   1: with an upsert key by the upsert-key value (all changes of one upsert key stay in order);
   without one by a non-key column of the row itself (``level``, column 2), so a row's ADD and
   its RETRACT share a channel and the ADD arrives first. Which routing value goes to which
   channel is drawn (a drawn hash function), so every partition can occur.

*Tolerated* streams are arbitrary op sequences over a small pool of rows (retractions of rows
never added, duplicates, ``+U`` into empty state): no guarantee holds, yet every
implementation must match the model exactly on them too.

All pools mix ``1``, ``1.0``, ``True``, ``None`` and strings, so type-exactness is exercised
in sink keys, upsert keys, routing values and payloads. Generation is O(events) draws. Long
histories draw only a seed and a length (cheap, hundreds of events on one key); everything
else draws each decision from Hypothesis and so shrinks towards short, single-channel,
in-order streams of the first pool values.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from hypothesis import strategies as st

from ..spec import Change, JsonValue, Keys, Row, RowKind, canonical

PK, UK, LEVEL, PAYLOAD = 0, 1, 2, 3
"""Column positions of the generated rows ``(pk, uk, level, payload)``."""

KEYS_WITHOUT_UPSERT_KEY = Keys(pk=(PK,))
KEYS_WITH_UPSERT_KEY = Keys(pk=(PK,), upsert_key=(UK,))


@dataclass(frozen=True)
class GeneratedStream:
    """A generated input: the keys, the logical changelog and the order it arrives in.

    ``arrival`` is a channel-order-preserving merge of ``logical`` (for tolerated streams, which
    have no logical order, both are the same sequence). ``channels`` is how many channels
    received changes. ``bare_updates`` is True when updates are bare ``+U`` (no ``-U``).
    """

    keys: Keys
    logical: tuple[Change, ...]
    arrival: tuple[Change, ...]
    channels: int = 1
    bare_updates: bool = False

    def __repr__(self) -> str:
        uk = f"upsert_key={list(self.keys.upsert_key)}" if self.keys.has_upsert_key else "no upsert key"
        return (
            f"GeneratedStream({uk}, channels={self.channels}, bare_updates={self.bare_updates},\n"
            f"  logical={list(self.logical)!r},\n  arrival={list(self.arrival)!r})"
        )


@dataclass(frozen=True)
class Pools:
    """The values generated rows draw from (first values are what shrinking prefers)."""

    pks: tuple[JsonValue, ...] = (1, 2, 1.0, True, "1")
    uks: tuple[JsonValue, ...] = ("u1", "u2", "u3", 1, 1.0)
    levels: tuple[JsonValue, ...] = (10, 20, 30, 1, 1.0, True, None)
    payloads: tuple[JsonValue, ...] = ("a", "b", None, 0, 1, 1.0, True, False, -2.5, "", "é")


DEFAULT_POOLS = Pools()
LONG_HISTORY_POOLS = Pools(
    pks=(1,),
    uks=tuple(f"u{i}" for i in range(40)),
    levels=(10, 20, 30, 40, 1.0, True),
    payloads=("a", "b", 1, 1.0, None),
)


class Chooser(Protocol):
    """Where generation decisions come from (Hypothesis draws, or a seeded Random)."""

    def below(self, n: int) -> int:
        """An integer in ``[0, n)``; ``n >= 1``. 0 is the simplest choice."""
        ...


class _DrawChooser:
    """Decisions drawn from Hypothesis: shrinks each decision towards 0."""

    def __init__(self, draw: Callable[[st.SearchStrategy[int]], int]) -> None:
        self._draw = draw

    def below(self, n: int) -> int:
        return 0 if n <= 1 else self._draw(st.integers(0, n - 1))


class _RandomChooser:
    """Decisions from a seeded ``random.Random``: cheap for hundreds of events."""

    def __init__(self, seed: int) -> None:
        self._random = random.Random(seed)

    def below(self, n: int) -> int:
        return 0 if n <= 1 else self._random.randrange(n)


class _Op(enum.Enum):
    """Logical operations, simplest first (shrinking prefers inserts)."""

    INSERT = 0
    UPDATE = 1
    DELETE = 2
    DUPLICATE = 3  # insert an exact copy of a live row (no upsert key only)
    REINSERT = 4  # insert again an exact row that was deleted earlier


@dataclass
class _Logical:
    """The state of the logical changelog while it is generated."""

    keys: Keys
    single_live: bool
    bare_updates: bool
    live: list[Row] = field(default_factory=list)
    gone: list[Row] = field(default_factory=list)
    out: list[Change] = field(default_factory=list)

    def pk_free(self, pk: JsonValue, ignore: Row | None = None) -> bool:
        """With ``single_live``: no other live row has sink key ``pk``."""
        if not self.single_live:
            return True
        wanted = canonical([pk])
        return all(canonical([row[PK]]) != wanted for row in self.live if row is not ignore)

    def uk_free(self, uk: JsonValue) -> bool:
        """With an upsert key: no live row has upsert key ``uk`` (it is a key upstream)."""
        if not self.keys.has_upsert_key:
            return True
        wanted = canonical([uk])
        return all(canonical([row[UK]]) != wanted for row in self.live)

    def can_add(self, row: Row) -> bool:
        return self.pk_free(row[PK]) and self.uk_free(row[UK])

    def add(self, row: Row) -> None:
        self.live.append(row)
        self.out.append(Change(RowKind.INSERT, row))

    def remove(self, index: int, kind: RowKind) -> Row:
        row = self.live.pop(index)
        self.gone.append(row)
        self.out.append(Change(kind, row))
        return row


def _pick(choose: Chooser, values: Sequence[JsonValue]) -> JsonValue:
    return values[choose.below(len(values))]


def build_logical(
    choose: Chooser,
    keys: Keys,
    *,
    operations: int,
    pools: Pools = DEFAULT_POOLS,
    single_live: bool = False,
    bare_updates: bool = False,
) -> tuple[Change, ...]:
    """A logically ordered changelog of about ``operations`` operations (O(operations * live)).

    Retract-style unless ``bare_updates`` (which needs an upsert key): an update is ``-U old``
    then ``+U new``; with an upsert key ``new`` keeps the upsert key, and it may move to
    another sink key. With ``bare_updates`` an update is a single ``+U new`` of the same sink
    and upsert key. With an upsert key, at most one row per upsert-key value is live at any
    instant; with ``single_live``, at most one row per sink key too.
    """
    if bare_updates and not keys.has_upsert_key:
        raise ValueError("bare +U updates need an upsert key")
    state = _Logical(keys, single_live, bare_updates)
    for _ in range(operations):
        ops = [_Op.INSERT]
        if state.live:
            ops += [_Op.UPDATE, _Op.DELETE]
            if not keys.has_upsert_key and not single_live:
                ops.append(_Op.DUPLICATE)
        if state.gone:
            ops.append(_Op.REINSERT)
        op = ops[choose.below(len(ops))]
        if op is _Op.INSERT:
            row: Row = (
                _pick(choose, pools.pks),
                _pick(choose, pools.uks),
                _pick(choose, pools.levels),
                _pick(choose, pools.payloads),
            )
            if state.can_add(row):
                state.add(row)
        elif op is _Op.DUPLICATE:
            state.add(state.live[choose.below(len(state.live))])
        elif op is _Op.REINSERT:
            row = state.gone[choose.below(len(state.gone))]
            if state.can_add(row):
                state.add(row)
        elif op is _Op.DELETE:
            state.remove(choose.below(len(state.live)), RowKind.DELETE)
        else:
            _update(choose, state, pools)
    return tuple(state.out)


def _update(choose: Chooser, state: _Logical, pools: Pools) -> None:
    index = choose.below(len(state.live))
    old = state.live[index]
    moves = not state.bare_updates and choose.below(3) == 0  # a third of updates may move
    pk = _pick(choose, pools.pks) if moves else old[PK]
    if not state.pk_free(pk, ignore=old):
        pk = old[PK]
    uk = old[UK] if state.keys.has_upsert_key else _pick(choose, pools.uks)
    new: Row = (pk, uk, _pick(choose, pools.levels), _pick(choose, pools.payloads))
    if state.bare_updates:
        state.live[index] = new
        state.out.append(Change(RowKind.UPDATE_AFTER, new))
        return
    state.remove(index, RowKind.UPDATE_BEFORE)
    state.live.append(new)
    state.out.append(Change(RowKind.UPDATE_AFTER, new))


def routing_value(keys: Keys, change: Change) -> bytes:
    """What decides a change's channel: the upsert-key value, else the ``level`` column."""
    column = UK if keys.has_upsert_key else LEVEL
    return canonical([change.row[column]])


def route(
    choose: Chooser, keys: Keys, logical: Sequence[Change], channels: int
) -> tuple[tuple[Change, ...], int]:
    """Route each change to a channel by :func:`routing_value` and merge the channels.

    The channel of each distinct routing value is drawn (a drawn hash function); the merge
    picks, at each step, which non-empty channel delivers its next change. Returns the arrival
    order and the number of channels actually used. O(len(logical) * channels).
    """
    assignment: dict[bytes, int] = {}
    queues: list[list[Change]] = [[] for _ in range(channels)]
    for change in logical:
        value = routing_value(keys, change)
        if value not in assignment:
            assignment[value] = choose.below(channels)
        queues[assignment[value]].append(change)
    used = sum(1 for queue in queues if queue)
    positions = [0] * channels
    arrival: list[Change] = []
    while len(arrival) < len(logical):
        open_channels = [c for c in range(channels) if positions[c] < len(queues[c])]
        channel = open_channels[choose.below(len(open_channels))]
        arrival.append(queues[channel][positions[channel]])
        positions[channel] += 1
    return tuple(arrival), max(used, 1)


def _keys_for(upsert_key: bool) -> Keys:
    return KEYS_WITH_UPSERT_KEY if upsert_key else KEYS_WITHOUT_UPSERT_KEY


@st.composite
def _valid(
    draw: st.DrawFn,
    upsert_key: bool | None,
    max_operations: int,
    max_channels: int,
    single_live: bool,
    bare_updates: bool,
    pools: Pools,
) -> GeneratedStream:
    choose = _DrawChooser(draw)
    with_uk = draw(st.booleans()) if upsert_key is None else upsert_key
    keys = _keys_for(with_uk)
    operations = choose.below(max_operations + 1)
    logical = build_logical(
        choose, keys, operations=operations, pools=pools, single_live=single_live, bare_updates=bare_updates
    )
    # Most streams use several channels; shrinking still reaches one (all routed to channel 0).
    arrival, channels = route(choose, keys, logical, max_channels - choose.below(max_channels))
    return GeneratedStream(keys, logical, arrival, channels, bare_updates)


def valid_streams(
    upsert_key: bool | None = None,
    *,
    max_operations: int = 24,
    max_channels: int = 4,
    single_live: bool = False,
    pools: Pools = DEFAULT_POOLS,
) -> st.SearchStrategy[GeneratedStream]:
    """Valid retract-style streams (every update a ``-U``/``+U`` pair), routed and merged.

    ``upsert_key``: True, False, or None to draw it. ``single_live``: at most one live row per
    sink key at every instant of the logical changelog (the case where the sink PK is a key of
    the logical result). Covers duplicates (no upsert key), re-inserts, moves to another sink
    key, retractions of first occurrences, few and repeated upsert keys.
    """
    if not 1 <= max_channels <= 4:
        raise ValueError("max_channels must be within 1..4")
    return _valid(upsert_key, max_operations, max_channels, single_live, False, pools)


def bare_update_streams(
    *,
    max_operations: int = 24,
    max_channels: int = 4,
    single_live: bool = False,
    pools: Pools = DEFAULT_POOLS,
) -> st.SearchStrategy[GeneratedStream]:
    """Valid upsert-style streams: upsert key, updates as bare ``+U`` (no ``-U``).

    Routed by upsert key like :func:`valid_streams`. These produce replacements of non-last
    elements (rule 4) and are outside the scope of the convergence property (rule 12).
    """
    return _valid(True, max_operations, max_channels, single_live, True, pools)


@st.composite
def _long(
    draw: st.DrawFn, upsert_key: bool | None, min_operations: int, max_operations: int
) -> GeneratedStream:
    with_uk = draw(st.booleans()) if upsert_key is None else upsert_key
    keys = _keys_for(with_uk)
    operations = draw(st.integers(min_operations, max_operations))
    channels = draw(st.integers(1, 4))
    choose = _RandomChooser(draw(st.integers(0, 2**32 - 1)))
    logical = build_logical(choose, keys, operations=operations, pools=LONG_HISTORY_POOLS)
    arrival, channels = route(choose, keys, logical, channels)
    return GeneratedStream(keys, logical, arrival, channels)


def long_histories(
    upsert_key: bool | None = None, *, min_operations: int = 150, max_operations: int = 400
) -> st.SearchStrategy[GeneratedStream]:
    """Valid retract-style streams of hundreds of events on ONE sink key.

    Only a seed, a length and a channel count are drawn (a seeded ``random.Random`` makes the
    decisions), so each example is cheap; shrinking shortens the stream and simplifies the
    seed. With an upsert key there are 40 upsert-key values, so histories grow long.
    """
    return _long(upsert_key, min_operations, max_operations)


_KINDS = (RowKind.INSERT, RowKind.UPDATE_AFTER, RowKind.UPDATE_BEFORE, RowKind.DELETE)


@st.composite
def _tolerated(draw: st.DrawFn, upsert_key: bool | None, max_events: int, pools: Pools) -> GeneratedStream:
    with_uk = draw(st.booleans()) if upsert_key is None else upsert_key
    keys = _keys_for(with_uk)
    value = st.sampled_from
    row = st.tuples(
        value(pools.pks[:2]), value(pools.uks[:3]), value(pools.levels[:4]), value(pools.payloads)
    )
    pool = draw(st.lists(row, min_size=1, max_size=5))
    size = draw(st.integers(0, max_events))
    op = st.tuples(st.sampled_from(_KINDS), st.integers(0, len(pool) - 1))
    ops = draw(st.lists(op, min_size=size, max_size=size))
    changes = tuple(Change(kind, pool[index]) for kind, index in ops)
    return GeneratedStream(keys, changes, changes)


def tolerated_streams(
    upsert_key: bool | None = None, *, max_events: int = 30, pools: Pools = DEFAULT_POOLS
) -> st.SearchStrategy[GeneratedStream]:
    """Arbitrary op sequences over a pool of at most 5 rows on 2 sink keys.

    No ordering guarantee holds: retractions of rows never added, duplicates, ``+U`` into
    empty state, retractions before their ADD. ``logical == arrival``.
    """
    return _tolerated(upsert_key, max_events, pools)


def any_streams(upsert_key: bool | None = None) -> st.SearchStrategy[GeneratedStream]:
    """Valid, upsert-style and tolerated streams mixed (for broad differential checks)."""
    streams = [valid_streams(upsert_key), tolerated_streams(upsert_key)]
    if upsert_key is not False:
        streams.append(bare_update_streams())
    return st.one_of(streams)


# -- time: clock advances and event timestamps (TTL) ----------------------------------------------


@dataclass(frozen=True)
class Advance:
    """A clock advance, the ``{"time": T}`` line: processing time, or the watermark."""

    time: int


Step = Change | Advance
"""One item of a timed stream: a change, or a clock advance."""


@dataclass(frozen=True)
class TimedStream:
    """A stream with clock advances between changes (and ``ts`` on every change).

    ``ts`` is the clock at the change plus a drawn offset in ``[-lateness, ahead]``, so event
    time has late records (some already expired on arrival) and early ones; processing-time
    implementations ignore it.
    """

    keys: Keys
    steps: tuple[Step, ...]

    def __repr__(self) -> str:
        body = ", ".join(repr(step) for step in self.steps)
        return f"TimedStream(keys={self.keys!r}, steps=[{body}])"


@st.composite
def timed_streams(
    draw: st.DrawFn,
    base: st.SearchStrategy[GeneratedStream] | None = None,
    *,
    max_advance: int = 4,
    lateness: int = 6,
    ahead: int = 4,
) -> TimedStream:
    """A generated stream (valid, bare-update or tolerated by default) with time added.

    Before each change the clock advances by a drawn ``0..max_advance`` (0 most often, so
    several changes share an instant); each change gets ``ts = clock + offset``. With TTLs
    of a few ms (the suite uses 5) elements expire mid-stream, at, before and after the
    moments they are matched, replaced and rolled back to.
    """
    stream = draw(
        base if base is not None else st.one_of(valid_streams(), bare_update_streams(), tolerated_streams())
    )
    clock = 0
    steps: list[Step] = []
    for change in stream.arrival:
        delta = draw(st.sampled_from((0, 0, 0, *range(1, max_advance + 1))))
        if delta:
            clock += delta
            steps.append(Advance(clock))
        offset = draw(st.integers(-lateness, ahead))
        steps.append(Change(change.kind, change.row, ts=max(0, clock + offset)))
    return TimedStream(stream.keys, tuple(steps))
