"""The lifecycle state machine on a heap and a byte implementation, with and without TTL."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import settings

from upsertmat.conformance.lifecycle import LifecycleMachine, MigrationTarget, granularity_of
from upsertmat.conformance.suite import TTL_CONFIGS
from upsertmat.spec import Keys, Materializer, TtlSettings

from .support import SMALL_THRESHOLDS, make

TARGETS = (
    MigrationTarget.registered("VALUE/heap"),
    MigrationTarget.registered("ADAPTIVE/lmdb", SMALL_THRESHOLDS),
    MigrationTarget.registered("LEGACY/heap"),
)


@pytest.mark.parametrize("ttl", [False, True], ids=["no-ttl", "ttl"])
@pytest.mark.parametrize("name", ["MAP/heap", "LEGACY/heap", "SORTED/rocksdb"])
def test_lifecycle_rules_keep_the_implementation_equal_to_the_model(name: str, ttl: bool) -> None:
    def maker(keys: Keys) -> Materializer:
        return make(name, keys)

    def ttl_maker(keys: Keys, settings: TtlSettings) -> Materializer:
        return make(name, keys, replace(SMALL_THRESHOLDS, ttl=settings))

    machine = LifecycleMachine.bound_to(
        maker,
        f"lifecycle.{name}.{ttl}",
        ttl_maker=ttl_maker,
        ttl_configs=TTL_CONFIGS if ttl else (),
        granularity=granularity_of(name),
        migration_targets=TARGETS,
    )
    machine.TestCase.settings = settings(max_examples=6, stateful_step_count=20, deadline=None)
    machine.TestCase().runTest()
