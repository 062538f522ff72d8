"""The state machine with lifecycle rules: checkpoint/restore, migration and rescaling.

:class:`LifecycleMachine` extends :class:`~upsertmat.conformance.machine.MaterializerMachine`
(so it also gets the time/TTL rules of that machine) with rules that move the whole state
through :mod:`upsertmat.impls.lifecycle` between inputs. After every move, every later output
must still equal the model's.

With TTL the stamps travel with the elements, so a move between implementations of the same
granularity leaves the model untouched. A migration across granularities (per-key LEGACY <->
a per-element strategy) changes semantics (docs/operations.md, "Migration with TTL"): the
machine then moves the *model* the same way — a fresh model of the target's granularity
imports the old model's exported elements — and the implementation must equal that model
from then on.

The lifecycle rules need the implementation to export and import its state
(:class:`~upsertmat.spec.StateTransfer`, or without TTL :class:`~upsertmat.spec.HistoryAccess`);
the suite skips the lifecycle tests of implementations that offer neither.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar, cast

from hypothesis import strategies as st
from hypothesis.stateful import rule

from ..impls import Settings, Strategy, create_named
from ..impls.lifecycle import rescale, restore_checkpoint, take_checkpoint
from ..impls.registry import resolve
from ..spec import Granularity, Keys, Materializer, ModelMaterializer, TtlSettings
from .checks import Maker
from .machine import MaterializerMachine, TtlMaker


def granularity_of(name: str) -> Granularity:
    """The TTL granularity of a registered implementation: ``PER_KEY`` for LEGACY, else per element."""
    return Granularity.PER_KEY if resolve(name)[0] is Strategy.LEGACY else Granularity.PER_ELEMENT


@dataclass(frozen=True)
class MigrationTarget:
    """An implementation the ``migrate`` rule may move the state to.

    ``make(keys, ttl)`` builds a fresh, empty instance with ``ttl``; ``granularity`` is its
    TTL granularity (it decides whether the model must be migrated too).
    """

    name: str
    make: TtlMaker
    granularity: Granularity

    @classmethod
    def registered(cls, name: str, settings: Settings | None = None) -> MigrationTarget:
        """The registered implementation ``name`` (``STRATEGY/backend`` or alias), with ``settings``."""
        base = settings or Settings()

        def make(keys: Keys, ttl: TtlSettings) -> Materializer:
            return create_named(name, keys, replace(base, ttl=ttl))

        return cls(name, make, granularity_of(name))


class LifecycleMachine(MaterializerMachine):
    """Model vs implementation with checkpoint/restore, migrate and rescale rules.

    ``migration_targets``: other implementations the ``migrate`` rule may move the state to
    (and keep running on); empty means migrate to a fresh instance of the implementation
    under test. ``checkpoint_restore`` and ``rescale`` always rebuild the implementation
    under test (so after a migration, ``checkpoint_restore`` migrates back).
    """

    migration_targets: ClassVar[tuple[MigrationTarget, ...]] = ()

    @classmethod
    def bound_to(
        cls,
        maker: Maker,
        name: str = "",
        *,
        ttl_maker: TtlMaker | None = None,
        ttl_configs: tuple[TtlSettings, ...] = (),
        granularity: Granularity = Granularity.PER_ELEMENT,
        migration_targets: tuple[MigrationTarget, ...] = (),
    ) -> type[MaterializerMachine]:
        """:meth:`MaterializerMachine.bound_to`, plus the ``migration_targets``."""
        bound = super().bound_to(
            maker, name, ttl_maker=ttl_maker, ttl_configs=ttl_configs, granularity=granularity
        )
        cast("type[LifecycleMachine]", bound).migration_targets = migration_targets
        return bound

    def replace_implementation(self, impl: Materializer) -> None:
        """Continue on ``impl``; the rule-7 miss counter is a metric, not state: it restarts at 0."""
        super().replace_implementation(impl)
        self.model.retract_misses = impl.retract_misses

    def continue_on(self, make: Maker, granularity: Granularity) -> None:
        """Move the state into a fresh ``make(keys)`` of ``granularity`` and continue there.

        Across granularities (TTL on), the model moves the same way: a fresh model of
        ``granularity`` imports the old model's elements at the same clock.
        """
        assert self.impl is not None
        checkpoint = take_checkpoint(self.impl)
        if self.ttl.enabled and granularity is not self.model.granularity:
            model = ModelMaterializer(self.keys, self.ttl, granularity)
            model.import_elements(self.model.export_elements(), self.model.now)
            self.model = model
        self.replace_implementation(restore_checkpoint(checkpoint, make(self.keys)))

    def _make_under_test(self, keys: Keys) -> Materializer:
        return self.make_ttl(keys, self.ttl) if self.ttl.enabled else self.make(keys)

    @rule()
    def checkpoint_restore(self) -> None:
        """Checkpoint, then continue on a fresh instance of the implementation under test."""
        self.continue_on(self._make_under_test, self.granularity)

    @rule(data=st.data())
    def migrate(self, data: st.DataObject) -> None:
        """Move the state to another registered implementation and continue there."""
        if not self.migration_targets:
            self.continue_on(self._make_under_test, self.granularity)
            return
        target = data.draw(st.sampled_from(self.migration_targets), label="target")
        ttl = self.ttl

        def make(keys: Keys) -> Materializer:
            return target.make(keys, ttl)

        self.continue_on(make, target.granularity)

    @rule(parallelism=st.integers(1, 5))
    def rescale(self, parallelism: int) -> None:
        """Split the state by key group over ``parallelism`` instances, then merge it back.

        The instances are of the implementation under test (migrating back first if needed).
        """
        assert self.impl is not None
        if self.ttl.enabled and self.model.granularity is not self.granularity:
            self.continue_on(self._make_under_test, self.granularity)
        assert self.impl is not None
        parts = rescale([self.impl], self._make_under_test, self.keys, parallelism)
        try:
            merged = rescale(parts, self._make_under_test, self.keys, 1)
        finally:
            for part in parts:
                part.close()
        self.replace_implementation(merged[0])
