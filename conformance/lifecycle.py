"""The state machine with lifecycle rules: checkpoint/restore, migration and rescaling.

:class:`LifecycleMachine` extends :class:`~upsertmat.conformance.machine.MaterializerMachine`
(so it also gets whatever time/TTL rules that machine has) with rules that move the whole
state through :mod:`upsertmat.impls.lifecycle` between inputs; the model is untouched, so
every later output must still equal the model's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import rule

from ..impls.lifecycle import rescale, restore_checkpoint, take_checkpoint
from ..spec import Keys, Materializer
from .machine import MaterializerMachine


class LifecycleMachine(MaterializerMachine):
    """Model vs implementation with checkpoint/restore, migrate and rescale rules.

    ``migration_targets``: makers of other implementations the ``migrate`` rule may move the
    state to (and keep running on); empty means migrate to a fresh instance of the same one.
    """

    migration_targets: ClassVar[tuple[Callable[[Keys], Materializer], ...]] = ()

    def replace_implementation(self, impl: Materializer) -> None:
        """Continue on ``impl``; the rule-7 miss counter is a metric, not state: it restarts at 0."""
        super().replace_implementation(impl)
        self.model.retract_misses = impl.retract_misses

    @rule()
    def checkpoint_restore(self) -> None:
        """Checkpoint, then continue on a fresh instance restored from it."""
        assert self.impl is not None
        checkpoint = take_checkpoint(self.impl)
        self.replace_implementation(restore_checkpoint(checkpoint, self.make(self.keys)))

    @rule(data=st.data())
    def migrate(self, data: st.DataObject) -> None:
        """Move the state to another registered implementation and continue there."""
        assert self.impl is not None
        targets = self.migration_targets or (self.make,)
        make = data.draw(st.sampled_from(targets), label="target")
        self.replace_implementation(restore_checkpoint(take_checkpoint(self.impl), make(self.keys)))

    @rule(parallelism=st.integers(1, 5))
    def rescale(self, parallelism: int) -> None:
        """Split the state by key group over ``parallelism`` instances, then merge it back."""
        assert self.impl is not None
        parts = rescale([self.impl], self.make, self.keys, parallelism)
        try:
            merged = rescale(parts, self.make, self.keys, 1)
        finally:
            for part in parts:
                part.close()
        self.replace_implementation(merged[0])
