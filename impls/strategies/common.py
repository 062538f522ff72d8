"""What every fast strategy shares: the per-input shell around a state layout.

A strategy subclass supplies ``_add`` and ``_retract`` for one context key; this shell
computes the per-event values once (context key, match key, stamp), counts and logs rule-7
misses, and commits the backend once per input so each input's state change is atomic
(durable at once, or with a commit interval at the backend's next durable commit, at
:meth:`StrategyBase.commit` and at :meth:`StrategyBase.close`).
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Final, NoReturn, TypeGuard

from mypy_extensions import mypyc_attr

from ...spec import Change, Element, Granularity, Keys, RowKind, TimeDomain, UpdateType
from ...spec.misses import MissExplanation, explain_miss
from ..encoding import KeyEncoder
from ..misses import MissRecorder, MissSummary
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state import CorruptStateError, MapState, StateBackend, ValueState
from ..state.codec import decode_seq, encode_seq
from ..state.errors import storage_failure
from ..state.heap import HeapBackend
from .errors import LayoutError
from .prefetch import PrefetchedMapState, PrefetchedValueState
from .timers import Timers

__all__ = [
    "DELETE",
    "INSERT",
    "UPDATE_AFTER",
    "LayoutError",
    "StrategyBase",
    "changes_of_records",
    "check_chains",
    "decode_seq",
    "emit",
    "encode_seq",
    "missing",
    "require",
    "same_chains",
]

log = logging.getLogger("upsertmat")

# The output kinds as module constants: ``Final`` makes them C globals in the compiled build
# (an enum member read through its class is a type-attribute lookup per access).
INSERT: Final = RowKind.INSERT
UPDATE_AFTER: Final = RowKind.UPDATE_AFTER
DELETE: Final = RowKind.DELETE
_INSERT: Final = INSERT
_UPDATE_AFTER: Final = UPDATE_AFTER

ASYNC_BATCH: Final = 1024
"""Inputs per async-state batch: their first state reads are issued together."""


def _slot_setters() -> tuple[Any, Any, Any] | None:
    """The slot descriptors' setters of ``Change`` (kind, row, ts), or None without slots."""
    try:
        kind, row, ts = (Change.__dict__[name].__set__ for name in ("kind", "row", "ts"))
        return kind, row, ts
    except (KeyError, AttributeError):
        return None


_SETTERS = _slot_setters()
_SET_KIND: Final = None if _SETTERS is None else _SETTERS[0]
_SET_ROW: Final = None if _SETTERS is None else _SETTERS[1]
_SET_TS: Final = None if _SETTERS is None else _SETTERS[2]
_new: Final = object.__new__
_CHANGE: Final = Change  # a C global when compiled (an imported name is a dict lookup per use)


def in_place_on_heap(backend: StateBackend, settings: Settings) -> TypeGuard[HeapBackend]:
    """Whether a strategy's heap specialisation (:data:`.variants.HEAP_VARIANTS`) runs: on a heap
    backend with TTL off (expiry and trimming take the general paths) and async state off
    (its prefetched copies would miss direct writes; it gains nothing on heap)."""
    return isinstance(backend, HeapBackend) and not settings.ttl.enabled and not settings.async_state


def emit(kind: RowKind, row: StoredRow) -> Change:
    """``Change(kind, row)``: the same object (equal, same fields, ``ts`` None), built without
    the frozen dataclass's ``__init__`` (which sets each field through ``object.__setattr__``;
    this sets the three slots directly: ~0.2 us instead of ~0.5 us per output). Falls back to
    the constructor if ``Change`` ever stops having slots."""
    if _SET_KIND is None or _SET_ROW is None or _SET_TS is None:
        return Change(kind, row)
    change: Change = _new(_CHANGE)
    _SET_KIND(change, kind)
    _SET_ROW(change, row)
    _SET_TS(change, None)
    return change


def changes_of_records(records: list[Any], kinds: dict[str, RowKind], with_ts: bool) -> list[Change]:
    """The input changes of decoded records ``(arrival, op, *row)``, or ``(arrival, op, ts,
    *row)`` with ``with_ts``: ``Change(kinds[op], row, ts)`` each (the row a tuple slice of the
    record), built as :func:`emit` builds outputs (~0.15 us instead of ~0.5 us per change
    through the dataclass's ``__init__``). O(records)."""
    if _SET_KIND is None or _SET_ROW is None or _SET_TS is None:
        if with_ts:
            return [Change(kinds[record[1]], record[3:], record[2]) for record in records]
        return [Change(kinds[record[1]], record[2:], None) for record in records]
    changes: list[Change] = []
    for record in records:
        change: Change = _new(_CHANGE)
        _SET_KIND(change, kinds[record[1]])
        if with_ts:
            _SET_ROW(change, record[3:])
            _SET_TS(change, record[2])
        else:
            _SET_ROW(change, record[2:])
            _SET_TS(change, None)
        changes.append(change)
    return changes


def missing(state: str, context: bytes, seq: int) -> CorruptStateError:
    """The error for a node the layout's invariants say exists but the state lacks."""
    return CorruptStateError(
        f"state {state!r} lacks node {seq} of context key {context.decode('utf-8', 'replace')} "
        "(damaged state, or written by another strategy)"
    )


def require(condition: bool, context: bytes, what: str) -> None:
    """Raise :class:`LayoutError` about ``context`` unless ``condition`` (kept under ``-O``)."""
    if not condition:
        raise LayoutError(f"context key {context.decode('utf-8', 'replace')}: {what}")


def check_chains(
    context: bytes, seqs: list[int], matches: list[MatchKey], sames: list[int], index: dict[MatchKey, Any]
) -> None:
    """The same-chain invariants of a MAP or SORTED key, from its nodes in insertion order.

    ``seqs``/``matches``/``sames``: each node's seq, match key and ``same`` link;
    ``index``: every stored index entry of the key (match key -> ``[first, last]``). Each
    match key's nodes, in order, must be linked by ``same`` (the last one 0) and the index
    must hold exactly one ``[first, last]`` per match key present. O(n).
    """
    chains: dict[MatchKey, list[int]] = {}
    for seq, match in zip(seqs, matches, strict=True):
        chains.setdefault(match, []).append(seq)
    require(set(index) == set(chains), context, f"index keys {len(index)} != match keys {len(chains)}")
    links = dict(zip(seqs, sames, strict=True))
    for match, chain in chains.items():
        require(
            list(index[match]) == [chain[0], chain[-1]], context, f"index {index[match]} vs chain {chain}"
        )
        for seq, after in zip(chain, [*chain[1:], 0], strict=True):
            require(links[seq] == after, context, f"node {seq}: same {links[seq]}, expected {after}")


def same_chains(matches: list[MatchKey]) -> tuple[list[int], dict[MatchKey, list[int]]]:
    """Same-match-key chains of a history whose element ``i`` gets sequence number ``i + 1``.

    Returns ``(same, entries)``: ``same[i]`` is the seq of the next element with the match key
    of element ``i`` (0 if none); ``entries`` maps each match key to ``[first, last]`` seq. O(n).
    """
    same = [0] * len(matches)
    entries: dict[MatchKey, list[int]] = {}
    for position, match in enumerate(matches):
        seq = position + 1
        entry = entries.get(match)
        if entry is None:
            entries[match] = [seq, seq]
        else:
            same[entry[1] - 1] = seq
            entry[1] = seq
    return same, entries


@mypyc_attr(allow_interpreted_subclasses=True)
class StrategyBase:
    """The ``Materializer`` and ``StateTransfer`` shell of VALUE, MAP, SORTED and ADAPTIVE.

    Per input: one context-key and one match-key computation, the layout's state accesses,
    and one ``backend.commit()``. Stamps: the processing-time clock (``advance_time``), or in
    the event-time domain the change's ``ts`` (required when TTL is on).

    Per-element TTL (docs/ttl.md): every stamp written also writes a timer
    (:class:`~.timers.Timers`); expiry runs the due timers, each re-checking its element and
    removing it if ``now >= stamp + ttl`` (:meth:`_expire_element`). The sweep is bounded: it
    runs in ``advance_time`` (the only place ``now`` moves) and after each input while a timer
    is due (a lagging sweep, or a late event-time record just written), and fires at most
    ``Settings.expiry_budget`` timers per call (0: all), so a clock jump over K due timers
    costs one call at most the budget's worth of firings and K / budget calls to clear.

    Until the sweep catches up, expired elements may still be stored; outputs do not depend
    on that. While a timer is due, the shell sets ``_lazy`` for the input, and each layout
    reads its key through :meth:`_expired`: it removes the expired elements it would read
    (VALUE, ADAPTIVE in VALUE mode: the whole record, in the O(n) scan it makes anyway;
    MAP, SORTED: the expired leading nodes of the input's match-key chain and the expired
    tail nodes, so the chain's first node and the tail are visible; LEGACY: the whole key if
    its stamp is expired). Each such removal is the one the element's timer would have
    made, and happens once, so it is amortised; the timer, when it fires, finds the element
    gone (or its seq reused by a fresh element) and does nothing. Reads outside inputs
    (:meth:`elements`, :meth:`export_elements`, ``histories``, :meth:`stats`) filter expired
    elements without writing. With no timer due (the usual case: one comparison per input
    decides it) the stored state is exactly the visible state and nothing extra runs.
    Without TTL none of this runs (no timer state is touched).
    """

    strategy_name = "?"
    granularity = Granularity.PER_ELEMENT
    """What carries a TTL stamp: each element here; LEGACY overrides it with ``PER_KEY``."""

    @classmethod
    def check_settings(cls, settings: Settings) -> None:
        """Refuse settings this strategy cannot run with (UnsupportedSetting), before the
        registry opens any state. Nothing to refuse here; subclasses extend it."""
        return

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        settings = settings or Settings()
        self.keys = keys
        self.backend = backend
        self.retract_misses = 0
        self._now = 0
        self._ttl = settings.ttl
        self._ttl_ms = settings.ttl.ttl_ms
        self._timers = Timers(backend) if settings.ttl.enabled else None
        self._budget = settings.expiry_budget
        # True while the input being applied may meet expired elements still stored (the
        # sweep lags: a due timer is pending); the layouts then read through :meth:`_expired`.
        self._lazy = False
        self._restamp_replaced = settings.ttl.update_type is not UpdateType.ON_CREATE
        self._restamp_rollback = settings.ttl.update_type is UpdateType.ON_READ_AND_WRITE
        self._upsert = keys.has_upsert_key
        encoder = KeyEncoder(keys)  # the spec's bytes, through the fast path (impls/encoding.py)
        self._encoder = encoder
        self._keys_of = encoder.keys_of
        self._context_key = encoder.context_key
        # The match key as the layout keeps it: bytes, or tokens after :meth:`_use_match_tokens`.
        self._match_key: Callable[[StoredRow], MatchKey] = encoder.match_key
        # Processing time stamps a write with the clock; event time asks the TTL settings.
        self._stamp_is_now = settings.ttl.time_domain is TimeDomain.PROCESSING_TIME
        self._async = settings.async_state
        self._prefetched_values: list[PrefetchedValueState] = []
        self._prefetched_indexes: list[PrefetchedMapState] = []
        # Rule-7 explanations (upsertmat.misses.max-rows > 0): only :meth:`_miss` and the TTL
        # expiry paths touch it, never an input that matches.
        self._explainer = MissRecorder(settings.miss_rows) if settings.miss_rows > 0 else None
        # A heap backend's commit is clearing its undo journal: the loops end a unit with its
        # cheaper ``end_unit`` (a subclass of HeapBackend may do more in ``commit``, so only the
        # class itself).
        self._heap: HeapBackend | None = backend if type(backend) is HeapBackend else None
        # The input being applied, its kind and row (:meth:`_added`).
        self._input: Change | None = None
        self._input_kind: RowKind | None = None
        self._input_row: StoredRow = None

    def _use_match_tokens(self) -> None:
        """Take match keys as tokens from now on (:data:`~upsertmat.impls.rows.MatchKey`:
        an int upsert-key column's value is its own match key), in ``_add``/``_retract`` and
        wherever the layout computes one (``_match_key``). Only for a layout that stores no
        match key at rest: the heap variants, whose state leaves memory as elements."""
        self._encoder.use_tokens()
        self._match_key = self._encoder.match_token

    def _value_state(self, name: str) -> ValueState:
        """The backend's value state ``name``, keyed by context; with async state, wrapped so
        a batch's reads of it are issued together (:mod:`.prefetch`)."""
        state = self.backend.value_state(name)
        if not self._async:
            return state
        prefetched = PrefetchedValueState(state)
        self._prefetched_values.append(prefetched)
        return prefetched

    def _index_state(self, name: str) -> MapState:
        """The backend's map state ``name``, keyed by (context, match key); with async state,
        wrapped so a batch's reads of it are issued together."""
        state = self.backend.map_state(name)
        if not self._async:
            return state
        prefetched = PrefetchedMapState(state)
        self._prefetched_indexes.append(prefetched)
        return prefetched

    @property
    def now(self) -> int:
        """The clock: the greatest time passed to ``advance_time`` (or imported)."""
        return self._now

    def process(self, change: Change) -> Change | None:
        """Rules 1-11 for one input; the state change is committed before returning.

        Per input: one :class:`~upsertmat.impls.encoding.KeyEncoder` call gives the context
        key and the match key (the spec's bytes), then the layout's ``_add``/``_retract``.
        If anything raises half-way, every write of this input is rolled back (state, clock
        hints and the miss counter are as before the call) and the error propagates, a
        storage engine's error classified (:func:`~upsertmat.impls.state.errors.storage_failure`).
        """
        # The stamp may raise (event time without ts): before any state change.
        stamp = self._now if self._stamp_is_now else self._ttl.stamp_of(change.ts, self._now)
        misses = self.retract_misses
        try:
            context, match = self._encoder.pair(change.row)
            emitted = self._step(change, context, match, stamp)
        except BaseException as error:
            self._fail(misses, error)
        return emitted

    def _step(self, change: Change, context: bytes, match: MatchKey, stamp: int) -> Change | None:
        """The per-input shell (docs/architecture.md, *The per-input shell*): apply one input
        whose keys and stamp are computed, run the expiry the input made due, end the unit
        (``backend.commit()``); the caller rolls back and raises if this raises."""
        kind = change.kind
        row = change.row
        self._input, self._input_kind, self._input_row = change, kind, row
        timers = self._timers
        lazy = self._lazy = timers is not None and timers.has_due(self._now)
        emitted: Change | None
        if kind is _INSERT or kind is _UPDATE_AFTER:
            emitted = self._add(context, match, row, stamp)
        else:
            emitted = self._retract(context, match, change, stamp)
        # The sweep lags, or this late record's own timer is due: continue the sweep. (With
        # no timer due before the input, only a late stamp can make one due.)
        if lazy or (timers is not None and stamp + self._ttl_ms <= self._now):
            self._expire_due()
        self.backend.commit()
        return emitted

    def _fail(self, misses: int, error: BaseException) -> NoReturn:
        """Roll back a failed input and raise: ``error`` classified as a storage failure
        (:func:`~upsertmat.impls.state.errors.storage_failure`), or ``error`` itself."""
        self._roll_back(misses)
        failure = storage_failure(self.backend, error)
        if failure is None or failure is error:
            raise error
        raise failure from error

    def _roll_back(self, misses: int) -> None:
        """Undo the uncommitted writes of a failed call; forget in-memory hints derived from them."""
        self.backend.rollback()
        if self._explainer is not None and self.retract_misses > misses:
            self._explainer.discard_last()  # the failed input's miss never happened
        self.retract_misses = misses
        if self._timers is not None:
            self._timers.forget_hints()

    def process_many(
        self, changes: Iterable[Change], out: list[Change | None] | None = None
    ) -> list[Change | None]:
        """``[self.process(change) for change in changes]``, with less per-input overhead.

        Every input is applied and committed exactly as :meth:`process` does it, in order.
        Outputs are appended to ``out`` (a new list if None) as each input completes, and
        ``out`` is returned; if an input raises, it is rolled back, ``out`` holds the outputs
        of the inputs before it (all applied and committed) and the exception propagates.
        """
        out = [] if out is None else out
        if self._async:
            return self._process_async(changes, out)
        if self._timers is None:
            return self._process_without_ttl(changes, out)
        append, process = out.append, self.process
        for change in changes:  # TTL: the expiry sweep dominates; the shell as it is
            append(process(change))
        return out

    def _process_without_ttl(
        self, changes: Iterable[Change], out: list[Change | None]
    ) -> list[Change | None]:
        """:meth:`process_many`'s loop with TTL off: no timer, so no expiry bookkeeping per input.

        The one copy of the per-input shell (:meth:`_step`, written out here): with TTL off it
        is the hot path of every strategy, and in the compiled build the call to ``_step`` per
        input and its timer tests cost more than the 5% a heap cell may lose (measured:
        docs/architecture.md, *The per-input shell*). It must do what :meth:`process` does,
        input for input; tests/strategies/test_process_many.py runs both on every
        implementation and compares outputs, state, misses and rollback.

        The keys come from :meth:`~upsertmat.impls.encoding.KeyEncoder.pair`, the layout's
        methods are called through ``self`` (a direct native call in the compiled build;
        binding them to locals first would make each a generic Python call there), and on
        a heap backend the commit is its ``end_unit`` (:class:`~upsertmat.impls.state.heap.HeapBackend`:
        the journal's committed mark moves, its buffer is kept)."""
        encoder, backend, heap = self._encoder, self.backend, self._heap
        stamp_of, stamp_is_now = self._ttl.stamp_of, self._stamp_is_now
        emitted: Change | None
        for change in changes:
            stamp = self._now if stamp_is_now else stamp_of(change.ts, self._now)
            misses = self.retract_misses
            try:
                row = change.row
                context, match = encoder.pair(row)
                kind = change.kind
                if kind is _INSERT or kind is _UPDATE_AFTER:
                    self._input, self._input_kind, self._input_row = change, kind, row
                    emitted = self._add(context, match, row, stamp)
                else:
                    emitted = self._retract(context, match, change, stamp)
                if heap is None:
                    backend.commit()
                else:
                    heap.end_unit()
            except BaseException as error:
                self._fail(misses, error)
            out.append(emitted)
        return out

    def _process_async(self, changes: Iterable[Change], out: list[Change | None]) -> list[Change | None]:
        """Async state: per batch of :data:`ASYNC_BATCH` inputs, compute every key, prefetch
        the wrapped states' reads of them in one call each, then apply the inputs one by one
        in arrival order exactly as :meth:`process` does (so outputs, commits and state are
        the synchronous mode's). An input whose keys cannot be computed is left to
        :meth:`process`, which raises the synchronous error after the inputs before it."""
        batchable = changes if isinstance(changes, Sequence) else list(changes)
        encoder = self._encoder
        for start in range(0, len(batchable), ASYNC_BATCH):
            batch = batchable[start : start + ASYNC_BATCH]
            pairs: list[tuple[bytes, MatchKey]] = []
            for change in batch:
                try:
                    pairs.append(encoder.pair(change.row))
                except Exception:
                    break
            try:
                for values in self._prefetched_values:
                    values.prefetch([context for context, _ in pairs])
                if self._prefetched_indexes:
                    wanted = self._index_reads(pairs)
                    for index in self._prefetched_indexes:
                        index.prefetch(wanted)
                self._apply_batch(batch, pairs, out)
            finally:
                for values in self._prefetched_values:
                    values.release()
                for index in self._prefetched_indexes:
                    index.release()
            for change in batch[len(pairs) :]:  # the first raises, as in the synchronous mode
                out.append(self.process(change))
        return out

    def _index_reads(self, pairs: list[tuple[bytes, MatchKey]]) -> list[tuple[bytes, MatchKey]]:
        """The (context, match key) index entries an async batch will read, asked after the
        value states are prefetched: every pair here; a layout that reads its index only in
        some keys' modes (ADAPTIVE) narrows it."""
        return pairs

    def _apply_batch(
        self, batch: Sequence[Change], pairs: list[tuple[bytes, MatchKey]], out: list[Change | None]
    ) -> None:
        """:meth:`process` for ``batch[:len(pairs)]`` with the keys already computed."""
        stamp_of, stamp_is_now = self._ttl.stamp_of, self._stamp_is_now
        emitted: Change | None
        for change, (context, match) in zip(batch, pairs, strict=False):
            stamp = self._now if stamp_is_now else stamp_of(change.ts, self._now)
            misses = self.retract_misses
            try:
                emitted = self._step(change, context, match, stamp)
            except BaseException as error:
                self._fail(misses, error)
            out.append(emitted)

    def _added(self, kind: RowKind, row: StoredRow) -> Change:
        """``emit(kind, row)``, the output of an ADD (rules 3-5): the input change itself when
        it is exactly that change (the same kind and row object, no ``ts``, a plain
        ``Change``), as it is for every ``+U`` on a non-empty key and every ``+I`` on an empty
        one. ``Change`` is immutable, so an output that is the input object is the same output;
        it saves building one per ADD. The loops record each input (``_input``) before
        ``_add``; with a stale record the identity checks fail and a new change is built."""
        if kind is self._input_kind and row is self._input_row:
            change = self._input
            if change is not None and type(change) is _CHANGE and change.ts is None:
                return change
        return emit(kind, row)

    @abstractmethod
    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        """Apply an ADD (rules 3-5) to ``context``; return the ``+I``/``+U`` to emit.

        A rule-4 replacement takes ``stamp`` only when ``_restamp_replaced``; call
        :meth:`_stamped` for every stamp written.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement _add")

    @abstractmethod
    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        """Apply a RETRACT (rules 6-10) to ``context``; call :meth:`_miss` on rule 7.

        When ``_restamp_rollback``, the element emitted by rule 9 takes ``stamp``.
        """
        raise NotImplementedError(f"{type(self).__name__} does not implement _retract")

    def _stamped(self, context: bytes, seq: int, stamp: int) -> None:
        """Record that element ``seq`` of ``context`` now carries ``stamp`` (a timer). TTL only."""
        if self._timers is not None:
            self._timers.add(stamp + self._ttl_ms, context, seq)

    def _expired(self, stamp: int) -> bool:
        """``now >= stamp + ttl`` (TTL on)."""
        return self._now >= stamp + self._ttl_ms

    def _expire_due(self) -> int:
        """Run the due timers, at most ``expiry_budget`` of them (0: all); returns how many
        fired. Amortised O(1) accesses per write; at most the budget's worth per call."""
        assert self._timers is not None
        fired = 0
        for context, seq in self._timers.pop_due(self._now, self._budget):
            self._expire_element(context, seq)
            fired += 1
        return fired

    @abstractmethod
    def _expire_element(self, context: bytes, seq: int) -> None:
        """A timer for element ``seq`` of ``context`` fired: remove what is expired there."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _expire_element")

    def _miss(self, context: bytes, change: Change) -> None:
        """Rule 7: count the retraction that matched nothing and log a warning; with
        explanations on, explain it first (:meth:`_explain`), so that a count always has its
        explanation (a rollback of the input discards both)."""
        if self._explainer is not None:
            self._explain(self._explainer, context, change)
        self.retract_misses += 1
        log.warning(
            "retraction matched no stored row (context key %s): %r",
            context.decode("utf-8", "replace"),
            change,
        )

    def _explain(self, explainer: MissRecorder, context: bytes, change: Change) -> None:
        """Record why ``change`` matched nothing (:func:`~upsertmat.spec.misses.explain_miss`)
        from the newest ``explainer.max_rows`` visible rows of its own key: at most that many
        rows read (one read on VALUE and LEGACY, one per row on MAP and SORTED); a miss
        changes no state, so they are what the retraction was compared with."""
        elements, truncated = self._newest_elements(context, explainer.max_rows)
        rows = [row for row, _ in self._visible(elements)]
        expired = explainer.expired(context)
        explainer.record(explain_miss(self.keys, change, context, rows, truncated=truncated, expired=expired))

    def _newest_elements(self, context: bytes, limit: int) -> tuple[list[Element], bool]:
        """The newest ``limit`` stored elements of ``context``, oldest first, and whether
        older ones exist. Here: :meth:`_elements` sliced (right where a key is one value,
        read at once); layouts of one entry per row read only ``limit`` of them."""
        elements = self._elements(context)
        return elements[-limit:], len(elements) > limit

    def _note_expired(self, context: bytes, count: int = 1) -> None:
        """TTL expiry removed ``count`` rows (or the whole history) of ``context``: remembered
        so that a later miss on the key can say its rows expired. Only with explanations on."""
        if self._explainer is not None:
            self._explainer.note_expired(context, count)

    def take_misses(self) -> list[MissExplanation]:
        """The explanations of the misses since the last call, oldest first (rule 7;
        docs/spec.md). After one :meth:`process`: ``[]``, or that input's explanation.
        Empty when explanations are off (``upsertmat.misses.max-rows`` 0). At most the
        newest 10,000 are kept between calls; :attr:`miss_summary` counts them all."""
        return [] if self._explainer is None else self._explainer.take()

    @property
    def miss_recorder(self) -> MissRecorder | None:
        """The :class:`~upsertmat.impls.misses.MissRecorder` of this materializer (None with
        explanations off): for drivers that keep expiry notes across instances (Spark)."""
        return self._explainer

    @property
    def miss_summary(self) -> MissSummary:
        """Counters over every explained miss of this materializer (this process): per cause
        and per differing column, with hints (:class:`~upsertmat.impls.misses.MissSummary`)."""
        return MissSummary() if self._explainer is None else self._explainer.summary

    def advance_time(self, now: int) -> None:
        """Move the clock (a time in the past is ignored); with TTL, expire what is due.

        If expiry raises, its writes are rolled back and the clock keeps its old value.
        """
        if now > self._now:
            previous = self._now
            self._now = now
            try:
                if self._timers is not None and self._expire_due():
                    self.backend.commit()
            except BaseException as error:
                self._now = previous
                self._fail(self.retract_misses, error)

    def histories(self) -> Iterator[tuple[bytes, list[StoredRow]]]:
        """Every non-empty context key with its rows in insertion order (a full scan)."""
        for context in self._contexts():
            rows = [row for row, _ in self.elements(context)]
            if rows:
                yield context, rows

    def elements(self, context: bytes) -> list[Element]:
        """The visible rows of ``context`` with their timestamps, in insertion order. O(n)."""
        return self._visible(self._elements(context))

    def _visible(self, elements: list[Element]) -> list[Element]:
        """``elements`` without the expired ones (stored until the sweep reaches them)."""
        if self._timers is None:
            return elements
        now, ttl_ms = self._now, self._ttl_ms
        return [element for element in elements if now < element[1] + ttl_ms]

    def load_histories(self, histories: Iterable[tuple[bytes, list[StoredRow]]]) -> None:
        """Replace the rows of each given context key (an empty list removes the key).

        Elements are stamped with the current clock; committed once at the end.
        """
        self._import((context, [(tuple(row), self._now) for row in rows]) for context, rows in histories)

    def export_elements(self) -> Iterator[tuple[bytes, list[Element]]]:
        """Every non-empty context key with its visible elements in insertion order (a full scan)."""
        for context in self._contexts():
            elements = self.elements(context)
            if elements:
                yield context, elements

    def import_elements(self, items: Iterable[tuple[bytes, list[Element]]], now: int) -> None:
        """Set the elements of each given key (empty removes it) and the clock to ``now``.

        Imported stamps get timers; elements already expired at ``now`` are invisible at once
        and removed by the (bounded) expiry sweep.
        """
        self._now = now
        self._import(items)

    def _import(self, items: Iterable[tuple[bytes, list[Element]]]) -> None:
        for context, elements in items:
            self._drop(context)
            if elements:
                self._load(context, [(tuple(row), stamp) for row, stamp in elements])
        if self._timers is not None:
            self._expire_due()
        self.backend.commit()

    def stats(self) -> dict[str, int]:
        """``keys`` and ``elements`` visible (expired ones still stored are not counted) and
        ``timers`` pending (physical TTL entries; stale and due ones included). A full scan."""
        keys = elements = 0
        for _, stored in self.export_elements():
            keys += 1
            elements += len(stored)
        return {
            "keys": keys,
            "elements": elements,
            "timers": 0 if self._timers is None else self._timers.count(),
        }

    @abstractmethod
    def _contexts(self) -> list[bytes]:
        """Every context key that may hold rows (a scan)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _contexts")

    @abstractmethod
    def _elements(self, context: bytes) -> list[Element]:
        """(row, stamp) of every element of ``context`` in insertion order (a scan of one key)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _elements")

    @abstractmethod
    def _drop(self, context: bytes) -> None:
        """Remove every stored element of ``context``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _drop")

    @abstractmethod
    def _load(self, context: bytes, elements: list[Element]) -> None:
        """Store ``elements`` (non-empty) as the whole history of an empty ``context``,
        with a timer per stamp (:meth:`_stamped`)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _load")

    def _check(self) -> None:
        """Verify the layout invariants of every stored key (a full scan); raise
        :class:`LayoutError` naming the key and the broken invariant. Tests call it after
        every step (the conformance state machine does); each layout overrides it."""
        return

    def commit(self) -> None:
        """A durability point: every input processed so far is durable when this returns.

        Only needed with a commit interval > 1 (``execution.checkpointing.interval``, rocksdb
        and lmdb), where the backend writes one batch per N inputs; otherwise every input is
        durable when ``process`` returns and this does nothing. A storage failure raises as in
        ``process`` (the state is then at the previous durable commit: reopen it)."""
        try:
            self.backend.checkpoint()
        except BaseException as error:
            self._fail(self.retract_misses, error)

    def close(self) -> None:
        """Commit what is pending (:meth:`commit`), then close the backend (files, locks);
        the materializer is unusable afterwards."""
        try:
            self.commit()
        finally:
            self.backend.close()
