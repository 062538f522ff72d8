"""The reusable conformance suite: subclass :class:`MaterializerTests` and name your implementation.

A test module needs three lines::

    from upsertmat.conformance.suite import MaterializerTests

    class TestMapRocksdb(MaterializerTests):
        implementation = "MAP/rocksdb"      # or an alias, or "package.module:factory"

or override :meth:`MaterializerTests.make` to build the implementation yourself. Every test
builds fresh implementations and closes them. What runs: the scenario catalogue (exact output
after every input), pinned streams, Hypothesis differential tests against the model over valid,
upsert-style, tolerated and long streams, the state machine, TTL scenarios/streams/machine,
and the lifecycle state machine (checkpoint/restore, migration to ``migration_targets``,
rescaling; skipped for implementations that cannot export and import their state).

Hypothesis tests are built when they run, so they take the profile loaded at that moment
(``upsertmat-dev``/``-ci``/``-nightly``, see ``profiles.py``); example counts are the profile's
``max_examples`` times a per-test weight, times ``examples_scale`` (a class attribute) and the
environment variable ``UPSERTMAT_EXAMPLES_SCALE`` (default 1).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import ClassVar, TypeVar

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import run_state_machine_as_test

from ..impls import Settings, create_named
from ..impls.lifecycle import supports_transfer
from ..spec import (
    Granularity,
    HistoryAccess,
    Keys,
    Materializer,
    StateTransfer,
    TimeDomain,
    TtlSettings,
    Unsupported,
    UpdateType,
)
from .checks import check_scenario, check_stream, check_timed_stream, check_ttl_scenario
from .generators import (
    GeneratedStream,
    bare_update_streams,
    long_histories,
    timed_streams,
    tolerated_streams,
    valid_streams,
)
from .lifecycle import LifecycleMachine, MigrationTarget, granularity_of
from .machine import MaterializerMachine
from .misses import misses_at_debug
from .pinned import PINNED, ttl_probe
from .program.suite import STATE_MACHINE_SKIP, ProgramSuite
from .protocol import Program
from .scenarios import SCENARIOS, TTL_SCENARIOS, Scenario, TtlScenario

T = TypeVar("T")

TTL_CONFIGS: tuple[TtlSettings, ...] = tuple(
    TtlSettings(ttl_ms=5, time_domain=domain, update_type=policy)
    for domain in TimeDomain
    for policy in UpdateType
)
"""The TTL configurations every implementation is checked under: both domains x three policies."""

MIGRATION_TARGETS: tuple[str, ...] = ("VALUE/heap", "LEGACY/heap", "SORTED/lmdb")
"""Where the lifecycle machine's ``migrate`` rule moves state by default: a per-element and a
per-key heap strategy and a byte backend (cheap to open), so every implementation migrates to
another strategy, another granularity and another backend."""

SCALE_VARIABLE = "UPSERTMAT_EXAMPLES_SCALE"

_TTL_REFUSALS: dict[tuple[type, str | None, TtlSettings], str | None] = {}
"""(suite class, implementation, TTL configuration) -> why it is refused, or None."""


def examples_scale() -> float:
    """The multiplier from ``UPSERTMAT_EXAMPLES_SCALE`` (default 1.0; must be > 0)."""
    text = os.environ.get(SCALE_VARIABLE, "1")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{SCALE_VARIABLE} must be a number, got {text!r}") from None
    if not value > 0:
        raise ValueError(f"{SCALE_VARIABLE} must be > 0, got {text!r}")
    return value


def scaled_settings(weight: float = 1.0, scale: float = 1.0) -> settings:
    """The current profile with ``max_examples`` scaled (at least 1) and slow-data checks off."""
    current = settings()
    return settings(
        current,
        max_examples=max(1, round(current.max_examples * weight * scale * examples_scale())),
        suppress_health_check=[
            *current.suppress_health_check,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
        ],
    )


def run_property(
    name: str,
    strategy: st.SearchStrategy[T],
    check: Callable[[T], None],
    *,
    weight: float = 1.0,
    scale: float = 1.0,
    examples: Sequence[T] = (),
) -> None:
    """Run ``check`` on values of ``strategy`` (explicit ``examples`` first) under Hypothesis.

    ``name`` keys the example database, so a failure found once is replayed first next time.
    """
    __tracebackhide__ = True  # a failure shows the check's message, not its code

    def property_(value: T) -> None:
        __tracebackhide__ = True  # a failure shows the check's message, not its code
        check(value)

    property_.__qualname__ = property_.__name__ = name.replace(".", "_").replace("/", "_")
    # Hypothesis keys its example database by the function's source; ours is shared, so add
    # the name (the same hook Hypothesis's own state machines use).
    setattr(property_, "_hypothesis_internal_add_digest", name.encode())  # noqa: B010
    test = given(strategy)(property_)
    for value in reversed(examples):
        test = example(value)(test)
    scaled_settings(weight, scale)(test)()


class MaterializerTests:
    """The conformance suite. Subclass it, set ``implementation`` (or override ``make``).

    Class attributes: ``implementation`` (registry name, alias or ``module:factory``),
    ``impl_settings`` (a :class:`~upsertmat.impls.Settings`; strategy/backend come from the
    name), ``examples_scale`` (multiplies every Hypothesis example count), and
    ``pinned_streams`` (extra streams replayed first, e.g. failures you found),
    ``ttl_granularity`` (None: PER_KEY for LEGACY, else PER_ELEMENT), ``ttl_weight``
    (examples of each TTL configuration relative to the untimed tests), ``lifecycle_machine``
    and ``migration_targets`` (registry names the ``migrate`` rule moves state to).
    TTL tests build through :meth:`make_ttl` (the registry; skipped without ``implementation``).
    Lifecycle rules need :class:`~upsertmat.spec.StateTransfer` (or, without TTL,
    :class:`~upsertmat.spec.HistoryAccess`); without it they are skipped, not failed.

    **Not supported.** An implementation that raises :class:`~upsertmat.spec.Unsupported` (from
    its factory, e.g. for TTL settings, or from ``export_elements``/``histories``) has the tests
    that need it skipped with the exception's message as the reason: each TTL configuration is
    probed once (a refused one skips its TTL scenarios and streams and is left out of the
    machines' draws), and a refused export skips the lifecycle machine.
    """

    implementation: ClassVar[str | None] = None
    impl_settings: ClassVar[Settings | None] = None
    examples_scale: ClassVar[float] = 1.0
    pinned_streams: ClassVar[tuple[GeneratedStream, ...]] = ()
    machine: ClassVar[type[MaterializerMachine]] = MaterializerMachine
    ttl_granularity: ClassVar[Granularity | None] = None
    ttl_weight: ClassVar[float] = 0.25
    lifecycle_machine: ClassVar[type[LifecycleMachine]] = LifecycleMachine
    migration_targets: ClassVar[tuple[str, ...]] = MIGRATION_TARGETS
    command: ClassVar[str | None] = None
    command_batch: ClassVar[int] = 20
    command_timeout: ClassVar[float] = 600.0
    command_scenarios_in_session: ClassVar[bool] = False

    def program(self) -> ProgramSuite | None:
        """The program-mode tests when ``command`` is set (``--upsertmat-cmd``), else None."""
        if self.command is None:
            return None
        return ProgramSuite(
            Program(self.command, self.command_timeout),
            f"{type(self).__module__}.{type(self).__qualname__}",
            self.command_batch,
            self.granularity(),
            run_property,
            self.examples_scale,
            self.command_scenarios_in_session,
        )

    @pytest.fixture(autouse=True)
    def _rule7_misses_at_debug(self) -> Iterator[None]:
        """Expected rule-7 misses are counted and logged at DEBUG, not WARNING (see ``misses``)."""
        with misses_at_debug():
            yield

    def make(self, keys: Keys) -> Materializer:
        """A fresh implementation for ``keys`` (the suite closes it)."""
        if self.implementation is None:
            raise NotImplementedError(f"{type(self).__name__}: set `implementation` or override `make`")
        return create_named(self.implementation, keys, self.impl_settings)

    def make_ttl(self, keys: Keys, ttl: TtlSettings) -> Materializer:
        """A fresh implementation for ``keys`` with TTL ``ttl`` (skips without ``implementation``)."""
        if self.implementation is None:
            pytest.skip("TTL tests build through the registry: set `implementation` or override `make_ttl`")
        return create_named(self.implementation, keys, replace(self.impl_settings or Settings(), ttl=ttl))

    def _made(self, keys: Keys) -> Materializer:
        """:meth:`make`, an :class:`~upsertmat.spec.Unsupported` answer turned into a skip."""
        try:
            return self.make(keys)
        except Unsupported as refused:
            pytest.skip(f"not supported: {refused}")

    def _made_ttl(self, keys: Keys, ttl: TtlSettings) -> Materializer:
        """:meth:`make_ttl`, an :class:`~upsertmat.spec.Unsupported` answer turned into a skip."""
        try:
            return self.make_ttl(keys, ttl)
        except Unsupported as refused:
            pytest.skip(f"not supported: {refused}")

    def _ttl_refusal(self, ttl: TtlSettings) -> str | None:
        """Why the implementation refuses ``ttl`` (its :class:`~upsertmat.spec.Unsupported`
        message), or None: one probe per class and configuration."""
        key = (type(self), self.implementation, ttl)
        if key not in _TTL_REFUSALS:
            try:
                self.make_ttl(Keys(pk=(0,)), ttl).close()
                _TTL_REFUSALS[key] = None
            except Unsupported as refused:
                _TTL_REFUSALS[key] = f"not supported: {refused}"
        return _TTL_REFUSALS[key]

    def _supported_ttl_configs(self) -> tuple[tuple[TtlSettings, ...], list[str]]:
        """The :data:`TTL_CONFIGS` the implementation accepts, and the reasons of the others."""
        reasons = {ttl: self._ttl_refusal(ttl) for ttl in TTL_CONFIGS}
        accepted = tuple(ttl for ttl, reason in reasons.items() if reason is None)
        return accepted, sorted({reason for reason in reasons.values() if reason is not None})

    def granularity(self) -> Granularity:
        """The implementation's TTL granularity: ``ttl_granularity``, else by strategy name."""
        if self.ttl_granularity is not None:
            return self.ttl_granularity
        name = self.implementation or ""
        if self.command is not None or ":" in name or not name:
            return Granularity.PER_ELEMENT
        return granularity_of(name)

    def _transfer_support(self) -> tuple[bool, bool, str]:
        """(exports/imports at all, with stamps, why not): StateTransfer or HistoryAccess,
        StateTransfer, and the :class:`~upsertmat.spec.Unsupported` message of an export
        that refuses (then neither)."""
        probe = self._made(Keys(pk=(0,)))
        try:
            if isinstance(probe, StateTransfer):
                list(probe.export_elements())
            elif isinstance(probe, HistoryAccess):
                list(probe.histories())
            return supports_transfer(probe), isinstance(probe, StateTransfer), ""
        except Unsupported as refused:
            return False, False, f"not supported: {refused}"
        finally:
            probe.close()

    def _migration_targets(self) -> tuple[MigrationTarget, ...]:
        return tuple(MigrationTarget.registered(name) for name in self.migration_targets)

    def _property(
        self,
        test: str,
        strategy: st.SearchStrategy[GeneratedStream],
        *,
        weight: float = 1.0,
        examples: Sequence[GeneratedStream] = (),
    ) -> None:
        __tracebackhide__ = True  # a failure shows the check's message, not its code
        if (program := self.program()) is not None:
            return program.streams(test, strategy, weight)
        run_property(
            f"{type(self).__module__}.{type(self).__qualname__}.{test}",
            strategy,
            lambda stream: check_stream(self._made, stream),
            weight=weight,
            scale=self.examples_scale,
            examples=examples,
        )

    @pytest.mark.parametrize("scenario", SCENARIOS, ids=[scenario.name for scenario in SCENARIOS])
    def test_scenario(self, scenario: Scenario) -> None:
        """Each catalogue scenario: the exact hand-written output after every input."""
        if (program := self.program()) is not None:
            return program.scenario(scenario.keys, scenario.name, scenario.inputs, scenario.expected)
        check_scenario(self._made, scenario)

    def test_pinned_streams(self) -> None:
        """Streams that encode known traps or once failed: equal to the model input by input."""
        if (program := self.program()) is not None:
            return program.pinned((*PINNED, *self.pinned_streams))
        for stream in (*PINNED, *self.pinned_streams):
            check_stream(self._made, stream)

    def test_valid_streams(self) -> None:
        """Valid retract-style streams, with and without upsert key, any channel interleaving."""
        self._property("valid", valid_streams())

    def test_bare_update_streams(self) -> None:
        """Upsert-style streams (bare ``+U``): replacements in place of non-last elements."""
        self._property("bare", bare_update_streams(), weight=0.5)

    def test_tolerated_streams(self) -> None:
        """Invalid input every implementation must still handle exactly like the model."""
        self._property("tolerated", tolerated_streams())

    def test_long_histories(self) -> None:
        """Hundreds of events on one sink key."""
        self._property("long", long_histories(), weight=0.1)

    def test_state_machine(self) -> None:
        """The state machine: model and implementation in lockstep over many keys."""
        if self.command is not None:
            pytest.skip(STATE_MACHINE_SKIP)
        current = scaled_settings(0.5, self.examples_scale)
        run_state_machine_as_test(  # type: ignore[no-untyped-call, unused-ignore]
            self.machine.bound_to(self._made, f"{type(self).__module__}.{type(self).__qualname__}.machine"),
            settings=settings(current, stateful_step_count=30),
        )

    def test_lifecycle_state_machine(self) -> None:
        """The state machine plus checkpoint/restore, migration and rescaling rules.

        Each run draws TTL off or one of ``TTL_CONFIGS`` (TTL only when the implementation is
        built through the registry and offers StateTransfer, so stamps can move): checkpoints,
        migrations (also across granularities, the model moving alike) and rescaling happen
        with TTL on too. Skipped when the implementation offers neither StateTransfer nor
        HistoryAccess. For a program (``command``): split runs over ``{STATE}``.
        """
        if (program := self.program()) is not None:
            return program.split_runs(TTL_CONFIGS, weight=0.25)
        movable, with_stamps, refused = self._transfer_support()
        if refused:
            pytest.skip(refused)
        if not movable:
            pytest.skip(
                "lifecycle rules need the implementation to offer StateTransfer "
                "(export_elements/import_elements) or HistoryAccess (histories/load_histories)"
            )
        timed = with_stamps and self.implementation is not None
        accepted = self._supported_ttl_configs()[0] if timed else ()
        self._probe_ttl(accepted)
        current = scaled_settings(0.25, self.examples_scale)
        run_state_machine_as_test(  # type: ignore[no-untyped-call, unused-ignore]
            self.lifecycle_machine.bound_to(
                self._made,
                f"{type(self).__module__}.{type(self).__qualname__}.lifecycle_machine",
                ttl_maker=self._made_ttl if accepted else None,
                ttl_configs=(TtlSettings(), *accepted) if accepted else (),
                granularity=self.granularity(),
                migration_targets=self._migration_targets(),
            ),
            settings=settings(current, stateful_step_count=20),
        )

    # -- TTL -------------------------------------------------------------------------------------

    @pytest.mark.parametrize("scenario", TTL_SCENARIOS, ids=[scenario.name for scenario in TTL_SCENARIOS])
    def test_ttl_scenario(self, scenario: TtlScenario) -> None:
        """Each hand-written TTL scenario of the implementation's granularity, exactly."""
        if scenario.granularity is not self.granularity():
            pytest.skip(
                f"a {scenario.granularity.value} scenario; this implementation is {self.granularity().value}"
            )
        if (program := self.program()) is not None:
            return program.scenario(
                scenario.keys, scenario.name, scenario.steps, scenario.expected, scenario.ttl
            )
        check_ttl_scenario(lambda keys: self._made_ttl(keys, scenario.ttl), scenario)

    @pytest.mark.parametrize(
        "ttl", TTL_CONFIGS, ids=[f"{ttl.time_domain.value}-{ttl.update_type.value}" for ttl in TTL_CONFIGS]
    )
    def test_ttl_streams(self, ttl: TtlSettings) -> None:
        """Streams with clock advances and timestamps under TTL: equal to the model at every input."""
        if (program := self.program()) is not None:
            return program.ttl_streams(ttl, self.ttl_weight)
        if self.implementation is not None and (refused := self._ttl_refusal(ttl)) is not None:
            pytest.skip(refused)
        granularity = self.granularity()
        name = f"ttl_{ttl.time_domain.value}_{ttl.update_type.value}"
        run_property(
            f"{type(self).__module__}.{type(self).__qualname__}.{name}",
            timed_streams(),
            lambda stream: check_timed_stream(
                lambda keys: self._made_ttl(keys, ttl), stream, ttl, granularity
            ),
            weight=self.ttl_weight,
            scale=self.examples_scale,
            examples=(ttl_probe(ttl),),
        )

    def _probe_ttl(self, configs: Sequence[TtlSettings]) -> None:
        """Feed :func:`~.pinned.ttl_probe` under each of ``configs`` before a machine draws
        from them: an implementation that ignores TTL fails here at once, on three inputs."""
        __tracebackhide__ = True
        granularity = self.granularity()
        for ttl in configs:

            def make(keys: Keys, ttl: TtlSettings = ttl) -> Materializer:
                return self._made_ttl(keys, ttl)

            check_timed_stream(make, ttl_probe(ttl), ttl, granularity)

    def test_ttl_state_machine(self) -> None:
        """The state machine under a drawn TTL configuration, with clock and event-time rules."""
        if self.command is not None:
            pytest.skip(STATE_MACHINE_SKIP)
        if self.implementation is None:
            pytest.skip("TTL tests build through the registry: set `implementation`")
        accepted, reasons = self._supported_ttl_configs()
        if not accepted:
            pytest.skip("; ".join(reasons))
        self._probe_ttl(accepted)
        current = scaled_settings(0.5 * self.ttl_weight * len(TTL_CONFIGS), self.examples_scale)
        run_state_machine_as_test(  # type: ignore[no-untyped-call, unused-ignore]
            self.machine.bound_to(
                self._made,
                f"{type(self).__module__}.{type(self).__qualname__}.ttl_machine",
                ttl_maker=self._made_ttl,
                ttl_configs=accepted,
                granularity=self.granularity(),
            ),
            settings=settings(current, stateful_step_count=30),
        )
