"""``process_many`` on every implementation: the outputs of ``process``, in order, exactly.

Also what it promises when an input in the middle fails: the outputs of the inputs before it
are in ``out``, those inputs are applied (the histories equal the model's after them), and
the error is the one ``process`` raises.
"""

from __future__ import annotations

import random

import pytest

from upsertmat.impls import available
from upsertmat.impls.strategies.common import emit
from upsertmat.spec import (
    BatchProcessing,
    Change,
    Keys,
    ModelMaterializer,
    Row,
    RowKind,
    insert,
    process_many,
    run_model,
)
from upsertmat.spec.contract import HistoryAccess

from .support import NO_UPSERT_KEY, UPSERT_KEY, opened, tolerated

ALL = [f"{strategy.value}/{backend.value}" for strategy, backend in available()]
BOTH_KEYS = pytest.mark.parametrize("keys", [NO_UPSERT_KEY, UPSERT_KEY], ids=["no-uk", "uk"])


@pytest.mark.parametrize("name", ALL)
@BOTH_KEYS
def test_process_many_equals_the_model(name: str, keys: Keys) -> None:
    for seed in range(3):
        changes = tolerated(random.Random(seed), 200)
        with opened(name, keys) as materializer:
            assert isinstance(materializer, BatchProcessing)
            out: list[Change | None] = []
            for start in range(0, len(changes), 37):  # uneven batches
                materializer.process_many(changes[start : start + 37], out)
            assert out == run_model(keys, changes), f"seed {seed}"
            assert isinstance(materializer, HistoryAccess)
            model = ModelMaterializer(keys)
            model.process_many(changes)
            assert dict(materializer.histories()) == dict(model.histories())


@pytest.mark.parametrize("name", ALL)
def test_a_failing_input_keeps_the_outputs_before_it(name: str) -> None:
    keys = UPSERT_KEY
    changes = tolerated(random.Random(7), 40)
    short = insert(1)  # no upsert-key column: the spec's IndexError
    with opened(name, keys) as materializer:
        out: list[Change | None] = []
        with pytest.raises(IndexError):
            process_many(materializer, [*changes, short, *changes], out)
        assert out == run_model(keys, changes)
        model = ModelMaterializer(keys)
        model.process_many(changes)
        assert isinstance(materializer, HistoryAccess)
        assert dict(materializer.histories()) == dict(model.histories())


@pytest.mark.parametrize("name", ALL)
@BOTH_KEYS
def test_the_two_copies_of_the_shell_agree(name: str, keys: Keys) -> None:
    """``process`` (``StrategyBase._step``) and ``process_many``'s TTL-free loop (the one
    written-out copy of the shell, ``_process_without_ttl``) give the same outputs, stored
    elements and miss counts, input for input, on every implementation (docs/architecture.md,
    *The per-input shell*)."""
    changes = tolerated(random.Random(11), 120)
    with opened(name, keys) as one, opened(name, keys) as many:
        assert isinstance(one, HistoryAccess) and isinstance(many, HistoryAccess)
        for start in range(0, len(changes), 7):
            batch = changes[start : start + 7]
            assert [one.process(change) for change in batch] == many.process_many(batch)  # type: ignore[attr-defined]
            assert dict(one.histories()) == dict(many.histories()), f"after input {start + len(batch)}"
            assert one.retract_misses == many.retract_misses


def test_process_many_without_the_method_loops_over_process() -> None:
    class OnlyProcess:
        def __init__(self) -> None:
            self.model = ModelMaterializer(UPSERT_KEY)

        def process(self, change: Change) -> Change | None:
            return self.model.process(change)

        @property
        def retract_misses(self) -> int:
            return self.model.retract_misses

        def advance_time(self, now: int) -> None:
            self.model.advance_time(now)

        def close(self) -> None:
            pass

    changes = tolerated(random.Random(3), 60)
    assert process_many(OnlyProcess(), changes) == run_model(UPSERT_KEY, changes)


@pytest.mark.parametrize("kind", list(RowKind))
def test_emit_builds_the_change_the_constructor_builds(kind: RowKind) -> None:
    row: Row = (1, 1.0, True, "x", None, [2])
    fast, slow = emit(kind, row), Change(kind, row)
    assert type(fast) is Change and fast == slow and hash(fast) == hash(slow)
    assert (fast.kind, fast.row, fast.ts) == (slow.kind, slow.row, None)
    assert repr(fast) == repr(slow)
    with pytest.raises(AttributeError):
        fast.ts = 3  # type: ignore[misc]  # still frozen
