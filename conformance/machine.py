"""A Hypothesis state machine driving an implementation and the model side by side.

Rules add and retract rows drawn from small pools over several sink keys; a bundle of rows
already added makes retractions hit often (including retractions of first occurrences and,
with an upsert key, retractions carrying other non-key values than the stored row). Whether
the keys have an upsert key is chosen once, at initialization. After every rule the outputs
must be equal exactly; invariants compare ``retract_misses`` and, when the implementation
offers :class:`~upsertmat.spec.HistoryAccess`, the whole state as per-key histories.

TTL: a machine bound with ``ttl_configs`` draws one TTL configuration at initialization
(``self.ttl``; the model gets it with ``granularity``), builds the implementation with
:meth:`MaterializerMachine.make_ttl`, and time matters: ``advance_time`` moves both clocks,
``shift_event_time`` changes the offset of the ``ts`` that :meth:`step` puts on every change in
event time (late records included), and an invariant compares the exported elements with
their stamps (:class:`~upsertmat.spec.StateTransfer`).

Later features add rules by subclassing (checkpoint/restore, migrate, rescale): feed changes
with :meth:`MaterializerMachine.step`, build a fresh implementation configured like the
current one with :meth:`MaterializerMachine.fresh`, swap it in with
:meth:`MaterializerMachine.replace_implementation`, and keep ``self.model`` and ``self.impl``
in lockstep. Bind an implementation with :meth:`MaterializerMachine.bound_to`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, cast

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule

from ..spec import (
    Change,
    Granularity,
    HistoryAccess,
    JsonValue,
    Keys,
    Materializer,
    ModelMaterializer,
    Row,
    RowKind,
    StateTransfer,
    TimeDomain,
    TtlSettings,
    Unsupported,
    canonical,
)
from .checks import Maker
from .generators import KEYS_WITH_UPSERT_KEY, KEYS_WITHOUT_UPSERT_KEY

_PKS: tuple[JsonValue, ...] = (1, 2, 3, 1.0, True)
_UKS: tuple[JsonValue, ...] = ("u1", "u2", 1, 1.0)
_LEVELS: tuple[JsonValue, ...] = (10, 20, 1.0, True)
_PAYLOADS: tuple[JsonValue, ...] = ("a", "b", None, 1, 1.0, True)

rows: st.SearchStrategy[Row] = st.tuples(
    st.sampled_from(_PKS), st.sampled_from(_UKS), st.sampled_from(_LEVELS), st.sampled_from(_PAYLOADS)
)
adds = st.sampled_from((RowKind.INSERT, RowKind.UPDATE_AFTER))
retracts = st.sampled_from((RowKind.UPDATE_BEFORE, RowKind.DELETE))

TtlMaker = Callable[[Keys, TtlSettings], Materializer]


class MaterializerMachine(RuleBasedStateMachine):
    """Model vs implementation over many context keys. Subclass and override :meth:`make`."""

    added = Bundle("added")
    check_histories: ClassVar[bool] = True
    """Compare full per-key histories when the implementation offers ``HistoryAccess``."""
    ttl_configs: ClassVar[tuple[TtlSettings, ...]] = ()
    """TTL configurations to draw from at initialization (empty: no TTL)."""
    granularity: ClassVar[Granularity] = Granularity.PER_ELEMENT
    """The implementation's TTL granularity (``PER_KEY`` for LEGACY)."""

    def __init__(self) -> None:
        super().__init__()
        self.keys: Keys = KEYS_WITHOUT_UPSERT_KEY
        self.ttl: TtlSettings = TtlSettings()
        self.model = ModelMaterializer(self.keys)
        self.impl: Materializer | None = None
        self.now = 0
        self.ts_offset = 0
        self.steps = 0

    def make(self, keys: Keys) -> Materializer:
        """Build the implementation under test (overridden by :meth:`bound_to`)."""
        raise NotImplementedError("bind an implementation with MaterializerMachine.bound_to(maker)")

    def make_ttl(self, keys: Keys, ttl: TtlSettings) -> Materializer:
        """Build the implementation under test with ``ttl`` (overridden by :meth:`bound_to`)."""
        raise NotImplementedError("bind a TTL maker with MaterializerMachine.bound_to(maker, ttl_maker=...)")

    def fresh(self) -> Materializer:
        """A new, empty implementation configured like the current one (keys, TTL)."""
        return self.make_ttl(self.keys, self.ttl) if self.ttl.enabled else self.make(self.keys)

    @classmethod
    def bound_to(
        cls,
        maker: Maker,
        name: str = "",
        *,
        ttl_maker: TtlMaker | None = None,
        ttl_configs: tuple[TtlSettings, ...] = (),
        granularity: Granularity = Granularity.PER_ELEMENT,
    ) -> type[MaterializerMachine]:
        """A subclass of this machine whose :meth:`make` is ``maker``.

        ``name`` (e.g. the test's qualified name) keeps example databases apart. With
        ``ttl_configs`` (and ``ttl_maker``), each run draws one TTL configuration.
        """

        def make(self: MaterializerMachine, keys: Keys) -> Materializer:
            return maker(keys)

        namespace: dict[str, object] = {"make": make, "ttl_configs": ttl_configs, "granularity": granularity}
        if ttl_maker is not None:

            def make_ttl(self: MaterializerMachine, keys: Keys, ttl: TtlSettings) -> Materializer:
                return ttl_maker(keys, ttl)

            namespace["make_ttl"] = make_ttl
        bound = type(name.replace(".", "_") or f"{cls.__name__}Bound", (cls,), namespace)
        return cast("type[MaterializerMachine]", bound)

    # -- plumbing subclasses reuse -------------------------------------------------------------

    def step(self, change: Change) -> Change | None:
        """Feed ``change`` to both; the outputs must be exactly equal. Returns the output.

        In event time a change without ``ts`` gets ``now + ts_offset`` (at least 0).
        """
        assert self.impl is not None
        if change.ts is None and self.ttl.time_domain is TimeDomain.EVENT_TIME:
            change = Change(change.kind, change.row, ts=max(0, self.now + self.ts_offset))
        expected = self.model.process(change)
        actual = self.impl.process(change)
        self.steps += 1
        assert actual == expected, (
            f"step {self.steps} {change!r}: model {expected!r}, implementation {actual!r}"
        )
        return actual

    def replace_implementation(self, impl: Materializer) -> None:
        """Close the current implementation and continue with ``impl`` (restore, migrate...)."""
        if self.impl is not None:
            self.impl.close()
        self.impl = impl

    # -- rules ---------------------------------------------------------------------------------

    @initialize(upsert_key=st.booleans(), data=st.data())
    def open(self, upsert_key: bool, data: st.DataObject) -> None:
        self.keys = KEYS_WITH_UPSERT_KEY if upsert_key else KEYS_WITHOUT_UPSERT_KEY
        if self.ttl_configs:
            self.ttl = data.draw(st.sampled_from(self.ttl_configs), label="ttl")
        self.model = ModelMaterializer(self.keys, self.ttl, self.granularity)
        self.replace_implementation(self.fresh())

    @rule(target=added, row=rows, kind=adds)
    def add(self, row: Row, kind: RowKind) -> Row:
        self.step(Change(kind, row))
        return row

    @rule(row=added, kind=adds)
    def add_again(self, row: Row, kind: RowKind) -> None:
        """A duplicate (no upsert key) or a replacement in place (upsert key)."""
        self.step(Change(kind, row))

    @rule(row=added, kind=retracts)
    def retract_added(self, row: Row, kind: RowKind) -> None:
        self.step(Change(kind, row))

    @rule(row=added, level=st.sampled_from(_LEVELS), payload=st.sampled_from(_PAYLOADS), kind=retracts)
    def retract_variant(self, row: Row, level: JsonValue, payload: JsonValue, kind: RowKind) -> None:
        """Same sink and upsert key as an added row, other non-key values."""
        self.step(Change(kind, (row[0], row[1], level, payload)))

    @rule(row=added, level=st.sampled_from(_LEVELS), payload=st.sampled_from(_PAYLOADS))
    def update_added(self, row: Row, level: JsonValue, payload: JsonValue) -> None:
        """A bare ``+U`` of an added row's keys with other values."""
        self.step(Change(RowKind.UPDATE_AFTER, (row[0], row[1], level, payload)))

    @rule(row=rows, kind=retracts)
    def retract_any(self, row: Row, kind: RowKind) -> None:
        self.step(Change(kind, row))

    @rule(delta=st.integers(0, 5))
    def advance_time(self, delta: int) -> None:
        """Move the clock; without TTL nothing observable may change."""
        assert self.impl is not None
        self.now += delta
        self.model.advance_time(self.now)
        self.impl.advance_time(self.now)

    @rule(offset=st.integers(-8, 6))
    def shift_event_time(self, offset: int) -> None:
        """Later changes carry ``ts = now + offset`` in event time (negative: late records)."""
        self.ts_offset = offset

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def misses_agree(self) -> None:
        if self.impl is not None:
            assert self.impl.retract_misses == self.model.retract_misses, (
                f"retract_misses {self.impl.retract_misses}, model {self.model.retract_misses}"
            )

    @invariant()
    def histories_agree(self) -> None:
        if self.impl is None or not self.check_histories or not isinstance(self.impl, HistoryAccess):
            return
        expected = {context: [canonical(row) for row in rows] for context, rows in self.model.histories()}
        try:
            actual = {context: [canonical(row) for row in rows] for context, rows in self.impl.histories()}
        except Unsupported:
            return  # declared not supported: nothing to compare
        assert actual == expected, f"state differs: {actual!r} vs model {expected!r}"

    @invariant()
    def layout_holds(self) -> None:
        """The implementation's own layout invariants, where it has a ``_check()`` (the
        built-in strategies do; third-party ones may): after every step."""
        check = getattr(self.impl, "_check", None)
        if callable(check):
            check()

    @invariant()
    def elements_agree(self) -> None:
        """With TTL: the exported elements, stamps included, equal the model's."""
        if self.impl is None or not self.ttl.enabled or not isinstance(self.impl, StateTransfer):
            return
        expected = {c: [(canonical(r), s) for r, s in e] for c, e in self.model.export_elements()}
        try:
            actual = {c: [(canonical(r), s) for r, s in e] for c, e in self.impl.export_elements()}
        except Unsupported:
            return  # declared not supported: nothing to compare
        assert actual == expected, f"elements differ: {actual!r} vs model {expected!r}"
        assert self.impl.now == self.model.now

    def teardown(self) -> None:
        if self.impl is not None:
            self.impl.close()
            self.impl = None
