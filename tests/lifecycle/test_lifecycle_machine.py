"""The lifecycle state machine on a heap and a byte implementation."""

from __future__ import annotations

import pytest
from hypothesis import settings

from upsertmat.conformance.lifecycle import LifecycleMachine
from upsertmat.spec import Keys, Materializer

from .support import make


@pytest.mark.parametrize("name", ["MAP/heap", "LEGACY/heap", "SORTED/rocksdb"])
def test_lifecycle_rules_keep_the_implementation_equal_to_the_model(name: str) -> None:
    def maker(keys: Keys) -> Materializer:
        return make(name, keys)

    machine = LifecycleMachine.bound_to(maker, f"lifecycle.{name}")
    machine.migration_targets = (
        lambda keys: make("VALUE/heap", keys),
        lambda keys: make("ADAPTIVE/lmdb", keys),
    )
    machine.TestCase.settings = settings(max_examples=6, stateful_step_count=20, deadline=None)
    machine.TestCase().runTest()
