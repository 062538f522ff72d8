"""LEGACY on heap, rocksdb and lmdb against the model: seeded random streams, and resumption."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest

from upsertmat.impls.registry import create_named
from upsertmat.impls.settings import Settings
from upsertmat.spec import Change, Keys, RowKind
from upsertmat.spec.contract import HistoryAccess
from upsertmat.spec.model import ModelMaterializer

NAMES = ["LEGACY/heap", "LEGACY/rocksdb", "LEGACY/lmdb"]
VALUES = [1, 1.0, True, None, "a", 0, [1], {"k": 1}]


def random_stream(seed: int, length: int) -> list[Change]:
    """Adds and retractions over few keys and values, with retractions of earlier rows favoured."""
    rng = random.Random(seed)
    added: list[tuple[object, ...]] = []
    stream = []
    for _ in range(length):
        if added and rng.random() < 0.45:
            row = rng.choice(added) if rng.random() < 0.8 else (rng.randrange(3), rng.randrange(3), 9)
            kind = rng.choice([RowKind.UPDATE_BEFORE, RowKind.DELETE])
        else:
            row = (rng.randrange(3), rng.randrange(3), rng.choice(VALUES))
            added.append(row)
            kind = rng.choice([RowKind.INSERT, RowKind.UPDATE_AFTER])
        stream.append(Change(kind, row))  # type: ignore[arg-type]
    return stream


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("upsert_key", [(), (1,)])
@pytest.mark.parametrize("seed", range(4))
def test_legacy_matches_the_model(name: str, upsert_key: tuple[int, ...], seed: int) -> None:
    keys = Keys(pk=(0,), upsert_key=upsert_key)
    model = ModelMaterializer(keys)
    implementation = create_named(name, keys)
    try:
        for change in random_stream(seed, 300):
            assert implementation.process(change) == model.process(change), change
        assert implementation.retract_misses == model.retract_misses
        assert isinstance(implementation, HistoryAccess)
        assert sorted(implementation.histories()) == sorted(model.histories())
    finally:
        implementation.close()


@pytest.mark.parametrize("name", ["LEGACY/rocksdb", "LEGACY/lmdb"])
def test_legacy_resumes_from_its_state_dir(name: str, tmp_path: Path) -> None:
    keys = Keys(pk=(0,), upsert_key=(1,))
    settings = replace(Settings(), state_dir=tmp_path)
    stream = random_stream(7, 400)
    model = ModelMaterializer(keys)
    expected = [model.process(change) for change in stream]
    outputs: list[Change | None] = []
    for start in range(0, len(stream), 100):  # four runs on the same directory
        implementation = create_named(name, keys, settings)
        try:
            outputs.extend(implementation.process(change) for change in stream[start : start + 100])
        finally:
            implementation.close()
    assert outputs == expected
    assert (tmp_path / name.split("/")[1] / "materializer" / "db").is_dir()
