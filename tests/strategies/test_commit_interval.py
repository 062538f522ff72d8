"""The commit interval of a library materializer (``execution.checkpointing.interval``).

On rocksdb and lmdb a materializer writes one durable batch per N inputs, plus one at
``commit()`` and at ``close()``; the default (None) is a durable commit per input. Commit
points are counted (``durable_commits`` of the backend), never timed; what a reopened state
holds is the state after the last durable commit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from upsertmat.impls import Settings, Strategy, create
from upsertmat.impls.settings import Backend, TtlSettings
from upsertmat.impls.state.errors import StorageFullError
from upsertmat.spec import Change, Keys, ModelMaterializer, delete, insert, update_after, update_before

KEYS = Keys(pk=(0,), upsert_key=(1,))
BYTE_BACKENDS = (Backend.ROCKSDB, Backend.LMDB)
STRATEGIES = (Strategy.LEGACY, Strategy.VALUE, Strategy.MAP, Strategy.SORTED, Strategy.ADAPTIVE)


def changes(count: int) -> list[Change]:
    """``count`` changes over three sink keys, each writing state (adds, updates, retractions)."""
    out: list[Change] = []
    for index in range(count):
        key, version = index % 3, index // 3
        if version % 4 == 3:
            out.append(update_before(key, version - 1, f"v{version - 1}"))
        elif version == 0:
            out.append(insert(key, version, f"v{version}"))
        else:
            out.append(update_after(key, version, f"v{version}"))
    out.append(delete(0, 0, "v0"))
    return out[:count]


def histories(materializer: Any) -> list[tuple[bytes, list[Any]]]:
    return sorted((context, [tuple(row) for row in rows]) for context, rows in materializer.histories())


def model_after(items: list[Change]) -> list[tuple[bytes, list[Any]]]:
    model = ModelMaterializer(KEYS)
    for change in items:
        model.process(change)
    return histories(model)


def settings_for(strategy: Strategy, backend: Backend, state_dir: Path, interval: int | None) -> Settings:
    return Settings(
        strategy=strategy,
        backend=backend,
        state_dir=state_dir,
        checkpoint_interval=interval,
        threshold_high=3,
        threshold_low=2,
    )


@pytest.mark.parametrize("backend", BYTE_BACKENDS, ids=lambda b: b.value)
@pytest.mark.parametrize("strategy", STRATEGIES, ids=lambda s: s.value)
def test_one_durable_commit_per_interval_plus_commit_and_close(
    strategy: Strategy, backend: Backend, tmp_path: Path
) -> None:
    stream = changes(13)
    settings = settings_for(strategy, backend, tmp_path, 5)
    materializer: Any = create(KEYS, settings)
    state = materializer.backend
    base = state.durable_commits
    outputs = [materializer.process(change) for change in stream[:12]]
    assert state.durable_commits - base == 2  # after inputs 5 and 10
    assert state.pending_units == 2
    materializer.commit()  # an explicit durability point
    assert state.durable_commits - base == 3
    assert state.pending_units == 0
    materializer.commit()  # nothing pending: nothing written
    assert state.durable_commits - base == 3
    outputs.append(materializer.process(stream[12]))
    materializer.close()  # commits the last input
    model = ModelMaterializer(KEYS)
    assert outputs == [model.process(change) for change in stream]
    reopened: Any = create(KEYS, settings_for(strategy, backend, tmp_path, None))
    try:
        assert histories(reopened) == model_after(stream)
    finally:
        reopened.close()


@pytest.mark.parametrize("backend", BYTE_BACKENDS, ids=lambda b: b.value)
@pytest.mark.parametrize("strategy", [Strategy.MAP, Strategy.SORTED, Strategy.LEGACY], ids=lambda s: s.value)
def test_a_reopened_state_is_the_last_durable_commit(
    strategy: Strategy, backend: Backend, tmp_path: Path
) -> None:
    """Inputs after the last durable commit are lost as in a crash (the backend is closed
    without the materializer's final commit); everything up to that commit is there."""
    stream = changes(12)
    materializer: Any = create(KEYS, settings_for(strategy, backend, tmp_path, 5))
    for change in stream:
        materializer.process(change)
    materializer.backend.close()  # no final commit: inputs 11 and 12 were never durable
    reopened: Any = create(KEYS, settings_for(strategy, backend, tmp_path, None))
    try:
        assert histories(reopened) == model_after(stream[:10])
    finally:
        reopened.close()


@pytest.mark.parametrize("backend", BYTE_BACKENDS, ids=lambda b: b.value)
def test_the_library_default_commits_every_input(backend: Backend, tmp_path: Path) -> None:
    materializer: Any = create(KEYS, settings_for(Strategy.MAP, backend, tmp_path, None))
    try:
        state = materializer.backend
        assert state.commit_interval == 1 and state.journal is None  # nothing journaled
        base = state.durable_commits
        for count, change in enumerate(changes(6), start=1):
            materializer.process(change)
            assert state.durable_commits - base == count
            assert state.pending_units == 0
    finally:
        materializer.close()


@pytest.mark.parametrize("backend", BYTE_BACKENDS, ids=lambda b: b.value)
def test_process_many_and_expiry_count_as_units(backend: Backend, tmp_path: Path) -> None:
    """``process_many`` ends one unit per input; an ``advance_time`` that expires state is one
    unit too (it is not a durability point by itself)."""
    ttl = TtlSettings(ttl_ms=10)
    settings = Settings(
        strategy=Strategy.MAP, backend=backend, state_dir=tmp_path, checkpoint_interval=4, ttl=ttl
    )
    materializer: Any = create(KEYS, settings)
    try:
        state = materializer.backend
        base = state.durable_commits
        materializer.process_many(changes(6))
        assert (state.durable_commits - base, state.pending_units) == (1, 2)
        materializer.advance_time(5)  # nothing expires: no unit
        assert state.pending_units == 2
        materializer.advance_time(100)  # everything expires: one unit
        assert (state.durable_commits - base, state.pending_units) == (1, 3)
        assert histories(materializer) == []
    finally:
        materializer.close()


@pytest.mark.parametrize("backend", BYTE_BACKENDS, ids=lambda b: b.value)
def test_held_commits_are_written_only_by_the_owner(backend: Backend, tmp_path: Path) -> None:
    """``defer_commits`` (replay's hold) overrides the interval: neither the interval nor
    ``commit()`` nor ``close()`` writes while held; the owner's ``checkpoint`` after releasing does."""
    materializer: Any = create(KEYS, settings_for(Strategy.MAP, backend, tmp_path, 2))
    state = materializer.backend
    base = state.durable_commits
    state.defer_commits = True
    for change in changes(5):
        materializer.process(change)
    materializer.commit()
    assert state.durable_commits == base
    state.defer_commits = False
    state.checkpoint()
    assert state.durable_commits - base == 1
    state.defer_commits = True
    materializer.process(changes(6)[5])
    materializer.close()  # held: the sixth input is dropped, as replay wants after a failure
    reopened: Any = create(KEYS, settings_for(Strategy.MAP, backend, tmp_path, None))
    try:
        assert histories(reopened) == model_after(changes(5))
    finally:
        reopened.close()


def test_heap_ignores_the_interval() -> None:
    materializer: Any = create(KEYS, Settings(strategy=Strategy.MAP, checkpoint_interval=7))
    stream = changes(9)
    for change in stream:
        materializer.process(change)
    materializer.commit()
    assert histories(materializer) == model_after(stream)
    materializer.close()


def test_a_failed_batch_write_leaves_the_last_durable_commit(tmp_path: Path) -> None:
    """A storage failure while writing a batch raises (classified) from the call that wrote
    it, and the state is at the previous durable commit: the batch's inputs are lost as in a
    crash, never half of them."""
    settings = settings_for(Strategy.MAP, Backend.ROCKSDB, tmp_path, 5)
    materializer: Any = create(KEYS, settings)
    stream = changes(12)
    for change in stream[:5]:
        materializer.process(change)  # durable after the fifth
    state = materializer.backend
    real = state.db

    class FullDisk:
        def write(self, *args: Any) -> None:
            raise Exception("IO error: No space left on device")

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

    state.db = FullDisk()
    for change in stream[5:9]:
        materializer.process(change)  # pending, readable
    with pytest.raises(StorageFullError, match="No space left"):
        materializer.process(stream[9])  # the tenth input writes the batch
    assert state.pending_units == 0 and histories(materializer) == model_after(stream[:5])
    state.db = real
    state.close()
    reopened: Any = create(KEYS, settings_for(Strategy.MAP, Backend.ROCKSDB, tmp_path, None))
    try:
        assert histories(reopened) == model_after(stream[:5])
    finally:
        reopened.close()


def test_a_failed_lmdb_batch_commit_leaves_the_last_durable_commit(tmp_path: Path) -> None:
    """The same on LMDB: a transaction whose commit fails is gone (LMDB aborts it)."""
    import lmdb

    settings = settings_for(Strategy.MAP, Backend.LMDB, tmp_path, 5)
    materializer: Any = create(KEYS, settings)
    stream = changes(12)
    for change in stream[:5]:
        materializer.process(change)
    state = materializer.backend

    class FailingCommit:
        def __init__(self, txn: Any) -> None:
            self.txn = txn

        def commit(self) -> None:
            self.txn.abort()
            raise lmdb.Error("mdb_txn_commit: No space left on device")

        def __getattr__(self, name: str) -> Any:
            return getattr(self.txn, name)

    for change in stream[5:9]:
        materializer.process(change)
    state.txn = FailingCommit(state.txn)
    with pytest.raises(StorageFullError, match="No space left"):
        materializer.process(stream[9])
    assert state.pending_units == 0 and histories(materializer) == model_after(stream[:5])
    materializer.close()
    reopened: Any = create(KEYS, settings_for(Strategy.MAP, Backend.LMDB, tmp_path, None))
    try:
        assert histories(reopened) == model_after(stream[:5])
    finally:
        reopened.close()
