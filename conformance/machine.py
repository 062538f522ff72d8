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

A failure (a different output, a crash, an invariant) raises a :class:`~.mismatch.Mismatch`
carrying every input fed since ``open`` and the rule it breaks, computed from the model's state
at the failing input (Hypothesis then prints the machine's steps).

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
from .generators import KEYS_WITH_UPSERT_KEY, KEYS_WITHOUT_UPSERT_KEY, Advance, Step
from .mismatch import Differs, Mismatch, deciding_rules, state_rules, stored_match

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

INVARIANTS = ("misses_agree", "histories_agree", "layout_holds", "elements_agree")
"""The invariants of :class:`MaterializerMachine` (checked after every step)."""


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
        self.fed: list[Step] = []
        """Every input fed since :meth:`open` (changes as fed, clock lines), for failures."""
        self.moved = False
        """Whether the state moved to another instance since :meth:`open` (lifecycle rules):
        then feeding :attr:`fed` to a fresh implementation is not the whole story."""
        self._last: tuple[Change | Advance, bool, bool] | None = None
        """The last input since the last move, with whether it matched a stored row (an ADD's
        replacement) and whether it missed (rule 7), to name the rule a failure breaks."""

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

    def mismatch(
        self,
        message: str,
        actual: Change | None = None,
        expected: Change | None = None,
        *,
        differs: Differs = Differs.OUTPUT,
        breaks: str | None = None,
        misses: tuple[int, int] | None = None,
    ) -> Mismatch:
        """A :class:`Mismatch` at the last input fed (``message`` says what differs), carrying
        every input fed since :meth:`open` and the rule that decided the last one (computed
        here: after a migration across granularities the model cannot be replayed from the
        inputs alone)."""
        rules: tuple[int, ...] | None = None
        if breaks is None:
            breaks, rules = self._decided(differs, actual, expected)
        inputs = "\n".join(f"  [{i}] {step!r}" for i, step in enumerate(self.fed))
        return Mismatch(
            f"{message}\ninputs fed so far ({len(self.fed)}, the last one last"
            + (", the state moved between them by the steps below" if self.moved else "")
            + f"):\n{inputs or '  (none)'}",
            keys=self.keys,
            steps=self.fed,
            actual=None if differs is not Differs.OUTPUT else () if actual is None else (actual,),
            expected=None if differs is not Differs.OUTPUT else () if expected is None else (expected,),
            ttl=self.ttl if self.ttl.enabled else None,
            granularity=self.model.granularity,
            misses=misses,
            differs=differs,
            rules=rules,
            breaks=breaks,
            replayable=not self.moved,
        )

    def _decided(
        self, differs: Differs, actual: Change | None, expected: Change | None
    ) -> tuple[str | None, tuple[int, ...] | None]:
        """(what else a failure breaks, or the rules it breaks) from the last input."""
        last = self._last
        if last is None:  # nothing fed since open or the last move
            return "the state moved by checkpoint/restore, migration or rescaling (docs/operations.md)", None
        change, replaces, missed = last
        if isinstance(change, Advance):
            return "TTL expiry when the clock advances (docs/ttl.md)", None
        if differs is Differs.STATE:
            return None, state_rules(self.keys, change, replaces=replaces, missed=missed)
        if differs is Differs.MISSES:
            return None, (7,)
        ops = () if actual is None else (actual.kind.value,)
        return None, deciding_rules(change, missed=missed, expected=expected, actual_ops=ops)

    def step(self, change: Change) -> Change | None:
        """Feed ``change`` to both; the outputs must be exactly equal. Returns the output.

        In event time a change without ``ts`` gets ``now + ts_offset`` (at least 0). A
        difference or a crash raises a :class:`Mismatch` naming the rule it breaks.
        """
        assert self.impl is not None
        if change.ts is None and self.ttl.time_domain is TimeDomain.EVENT_TIME:
            change = Change(change.kind, change.row, ts=max(0, self.now + self.ts_offset))
        replaces = (
            change.kind.is_add and self.keys.has_upsert_key and stored_match(self.model, self.keys, change)
        )
        misses = self.model.retract_misses
        expected = self.model.process(change)
        self.fed.append(change)
        self._last = (change, replaces, self.model.retract_misses > misses)
        self.steps += 1
        try:
            actual = self.impl.process(change)
        except Unsupported:
            raise
        except Exception as error:
            raise self.mismatch(
                f"input [{len(self.fed) - 1}] {change!r}: the implementation raised {type(error).__name__}: "
                f"{error} (the model emits {expected!r})",
                None,
                expected,
                differs=Differs.CRASH,
            ) from error
        if actual != expected:
            raise self.mismatch(
                f"input [{len(self.fed) - 1}] {change!r}: the model emits {expected!r}, the implementation "
                f"{actual!r}",
                actual,
                expected,
            )
        return actual

    def replace_implementation(self, impl: Materializer) -> None:
        """Close the current implementation and continue with ``impl`` (restore, migrate...)."""
        if self.impl is not None:
            self.impl.close()
            self.moved = True
            self._last = None
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
        self.fed.append(Advance(self.now))
        self._last = (Advance(self.now), False, False)
        try:
            self.impl.advance_time(self.now)
        except Unsupported:
            raise
        except Exception as error:
            raise self.mismatch(
                f"advance_time({self.now}): the implementation raised {type(error).__name__}: {error}",
                differs=Differs.CRASH,
                breaks="the clock (advance_time never emits nor fails; docs/conformance.md)",
            ) from error

    @rule(offset=st.integers(-8, 6))
    def shift_event_time(self, offset: int) -> None:
        """Later changes carry ``ts = now + offset`` in event time (negative: late records)."""
        self.ts_offset = offset

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def misses_agree(self) -> None:
        if self.impl is not None and self.impl.retract_misses != self.model.retract_misses:
            raise self.mismatch(
                f"retract_misses {self.impl.retract_misses}, model {self.model.retract_misses}",
                differs=Differs.MISSES,
                misses=(self.model.retract_misses, self.impl.retract_misses),
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
        if actual != expected:
            raise self.mismatch(f"state differs: {actual!r} vs model {expected!r}", differs=Differs.STATE)

    @invariant()
    def layout_holds(self) -> None:
        """The implementation's own layout invariants, where it has a ``_check()`` (the
        built-in strategies do; third-party ones may): after every step."""
        check = getattr(self.impl, "_check", None)
        if not callable(check):
            return
        try:
            check()
        except Exception as error:
            raise self.mismatch(
                f"the implementation's own layout check failed: {type(error).__name__}: {error}",
                differs=Differs.STATE,
                breaks="the implementation's own layout invariant (its _check())",
            ) from error

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
        if actual != expected:
            rows = {context: [row for row, _ in elements] for context, elements in actual.items()}
            wanted = {context: [row for row, _ in elements] for context, elements in expected.items()}
            raise self.mismatch(
                f"elements differ: {actual!r} vs model {expected!r}",
                differs=Differs.STATE,
                breaks=None if rows != wanted else "the TTL stamps of the stored rows (docs/ttl.md)",
            )
        if self.impl.now != self.model.now:
            raise self.mismatch(
                f"the clock: implementation now={self.impl.now}, model now={self.model.now}",
                differs=Differs.STATE,
                breaks="the clock (now follows advance_time; docs/ttl.md)",
            )

    def teardown(self) -> None:
        if self.impl is not None:
            self.impl.close()
            self.impl = None
