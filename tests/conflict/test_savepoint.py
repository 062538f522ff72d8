"""ON CONFLICT savepoints: round trips across backends and parallelisms; damage and mismatches refused."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from upsertmat.impls import Settings
from upsertmat.impls.conflict import CompactingMaterializer, create
from upsertmat.impls.conflict.savepoint import (
    DATA,
    MANIFEST,
    load_savepoint,
    restore_savepoint,
    write_savepoint,
)
from upsertmat.impls.lifecycle.errors import SavepointError, SavepointMismatch
from upsertmat.impls.settings import Backend
from upsertmat.spec import (
    CaseInsensitiveEqualizer,
    ConflictBehavior,
    Keys,
    insert,
    update_after,
    update_before,
)

KEYS = Keys(pk=(0,))
NOTHING, ERROR = ConflictBehavior.NOTHING, ConflictBehavior.ERROR


def make(backend: str, behavior: ConflictBehavior = NOTHING, keys: Keys = KEYS) -> CompactingMaterializer:
    return create(keys, Settings(backend=Backend(backend), conflict=behavior))


def filled(backend: str = "heap") -> CompactingMaterializer:
    """Ten keys with a current row, five of them with pending changes, watermark 7."""
    materializer = make(backend)
    for key in range(10):
        materializer.process(insert(key, 0, "a"))
    materializer.watermark(7)
    for key in range(5):
        materializer.process(update_before(key, 0, "a"))
        materializer.process(update_after(key, 1, True))
        materializer.process(insert(key, 1.0, None))
    return materializer


@pytest.mark.parametrize(("source", "target"), [("heap", "rocksdb"), ("rocksdb", "lmdb"), ("lmdb", "heap")])
def test_a_savepoint_restores_on_another_backend_with_identical_output(
    tmp_path: Path, source: str, target: str
) -> None:
    original = filled(source)
    write_savepoint(original, tmp_path / "sp")
    restored = make(target)
    restore_savepoint(restored, tmp_path / "sp")
    assert list(restored.export_keys()) == list(original.export_keys())
    assert restored.last_watermark == 7
    assert restored.watermark(7) == [] and restored.watermark(8) == original.watermark(8)
    original.close()
    restored.close()


def test_a_watermark_below_zero_round_trips(tmp_path: Path) -> None:
    # Pinned from the conflict state machine (Hypothesis): the library's clock may go below 0
    # (a first watermark of -1), and the savepoint it writes must restore.
    original = make("heap")
    original.watermark(-1)
    write_savepoint(original, tmp_path / "sp")
    restored = make("heap")
    restore_savepoint(restored, tmp_path / "sp")
    assert restored.last_watermark == original.last_watermark == -1
    original.close()
    restored.close()


@pytest.mark.parametrize("parallelism", [1, 2, 3, 5])
def test_shares_at_any_parallelism_partition_the_state(tmp_path: Path, parallelism: int) -> None:
    original = filled()
    write_savepoint(original, tmp_path / "sp")
    shares = [
        load_savepoint(tmp_path / "sp", KEYS, index=i, parallelism=parallelism)[1] for i in range(parallelism)
    ]
    assert sorted(state for share in shares for state in share) == list(original.export_keys())
    assert all(shares) or parallelism > 1


def test_a_savepoint_restores_under_the_other_compacting_behaviour(tmp_path: Path) -> None:
    write_savepoint(filled(), tmp_path / "sp")
    restored = make("heap", ERROR)
    restore_savepoint(restored, tmp_path / "sp")
    assert len(list(restored.export_keys())) == 10


def test_other_keys_or_equalizer_are_refused(tmp_path: Path) -> None:
    write_savepoint(filled(), tmp_path / "sp")
    with pytest.raises(SavepointMismatch, match="pk"):
        load_savepoint(tmp_path / "sp", Keys(pk=(1,)))
    with pytest.raises(SavepointMismatch, match="equalizer"):
        load_savepoint(tmp_path / "sp", Keys(pk=(0,), equalizer=CaseInsensitiveEqualizer()))


def test_a_damaged_data_file_is_refused_before_anything_is_imported(tmp_path: Path) -> None:
    write_savepoint(filled(), tmp_path / "sp")
    data = tmp_path / "sp" / DATA
    data.write_bytes(data.read_bytes()[:-3])
    target = make("heap")
    with pytest.raises(SavepointError, match="SHA-256"):
        restore_savepoint(target, tmp_path / "sp")
    assert list(target.export_keys()) == []


def test_a_truncated_data_file_with_a_matching_manifest_is_refused(tmp_path: Path) -> None:
    write_savepoint(filled(), tmp_path / "sp")
    data, manifest_path = tmp_path / "sp" / DATA, tmp_path / "sp" / MANIFEST
    data.write_bytes(data.read_bytes()[:-3])
    manifest = json.loads(manifest_path.read_text())
    manifest["data"].update(bytes=data.stat().st_size, sha256=hashlib.sha256(data.read_bytes()).hexdigest())
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(SavepointError):
        load_savepoint(tmp_path / "sp", KEYS)


def test_another_format_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / MANIFEST).write_text('{"format": "upsertmat-savepoint", "version": 1}')
    with pytest.raises(SavepointError, match="not an ON CONFLICT savepoint"):
        load_savepoint(tmp_path / "sp", KEYS)
