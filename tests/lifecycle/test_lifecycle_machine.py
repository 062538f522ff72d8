"""The lifecycle state machine on a heap and a byte implementation, with and without TTL."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import settings

from upsertmat.conformance.lifecycle import LifecycleMachine, MigrationTarget, granularity_of
from upsertmat.conformance.suite import TTL_CONFIGS, MaterializerTests
from upsertmat.spec import Change, Keys, Materializer, ModelMaterializer, TtlSettings

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


class _Opaque:
    """A materializer that offers neither StateTransfer nor HistoryAccess (it wraps the model)."""

    def __init__(self, keys: Keys) -> None:
        self._model = ModelMaterializer(keys)

    @property
    def retract_misses(self) -> int:
        return self._model.retract_misses

    def process(self, change: Change) -> Change | None:
        return self._model.process(change)

    def advance_time(self, now: int) -> None:
        self._model.advance_time(now)

    def close(self) -> None:
        self._model.close()


class _OpaqueTests(MaterializerTests):
    def make(self, keys: Keys) -> Materializer:
        return _Opaque(keys)


def test_an_implementation_without_state_transfer_skips_the_lifecycle_machine() -> None:
    assert isinstance(_Opaque(Keys(pk=(0,))), Materializer)
    with pytest.raises(pytest.skip.Exception, match="lifecycle rules need the implementation"):
        _OpaqueTests().test_lifecycle_state_machine()
