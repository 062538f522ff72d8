"""The registry built from parts: strategies x backends, filtered by what a backend offers."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsertmat.impls import (
    ALIASES,
    BackendEntry,
    Settings,
    StrategyEntry,
    UnknownImplementation,
    available,
    create,
    create_named,
    register_backend,
    register_strategy,
    registry,
)
from upsertmat.impls.config import UnsupportedSetting
from upsertmat.impls.settings import Backend, Strategy
from upsertmat.impls.state import HeapBackend, StateBackend
from upsertmat.impls.strategies.value import ValueMaterializer
from upsertmat.spec import Keys, insert

KEYS = Keys(pk=(0,))


def test_the_built_in_pairs_aliases_and_pipeline_only_pairs() -> None:
    assert len(available()) == 15
    assert {strategy for strategy, _ in available()} == set(Strategy)
    assert {backend for _, backend in available()} == {Backend.HEAP, Backend.ROCKSDB, Backend.LMDB}
    assert set(registry.PIPELINE_ONLY) == {
        (strategy, Backend.SPARK) for strategy in Strategy if strategy is not Strategy.SORTED
    }
    assert ALIASES["lmdb"] == (Strategy.SORTED, Backend.LMDB)
    with pytest.raises(UnknownImplementation, match="only inside the PySpark pipeline"):
        registry.factory_for(Strategy.MAP, Backend.SPARK)
    with pytest.raises(UnknownImplementation, match="no implementation of strategy SORTED"):
        registry.factory_for(Strategy.SORTED, Backend.SPARK)


def test_a_backend_without_ordered_iteration_gets_no_sorted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "BACKENDS", dict(registry.BACKENDS))
    register_backend(BackendEntry(Backend.LMDB, ordered=False, open=lambda _settings: HeapBackend()))
    assert (Strategy.SORTED, Backend.LMDB) not in available()
    assert (Strategy.MAP, Backend.LMDB) in available()
    materializer = create(KEYS, Settings(strategy=Strategy.MAP, backend=Backend.LMDB))
    assert isinstance(materializer.backend, HeapBackend)  # type: ignore[attr-defined]
    assert materializer.process(insert(1, "a")) == insert(1, "a")


def test_one_class_and_one_registration_make_a_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "STRATEGIES", dict(registry.STRATEGIES))
    target = f"{__name__}:LoudValue"
    register_strategy(StrategyEntry(Strategy.VALUE, target))
    for backend in (Backend.HEAP, Backend.ROCKSDB, Backend.LMDB):
        materializer = create_named(f"VALUE/{backend.value}", KEYS)
        try:
            assert isinstance(materializer, LoudValue)
        finally:
            materializer.close()


class LoudValue(ValueMaterializer):
    """VALUE under another class: what a registration of a new strategy class looks like."""

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)


def test_bad_settings_are_refused_before_any_file_is_opened(tmp_path: Path) -> None:
    settings = Settings(threshold_high=2, threshold_low=5, state_dir=tmp_path / "state")
    with pytest.raises(UnsupportedSetting, match=r"threshold\.high > threshold\.low"):
        create_named("ADAPTIVE/rocksdb", KEYS, settings)
    assert not (tmp_path / "state").exists()
