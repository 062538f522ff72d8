"""The canonical savepoint: round trips, migration between every pair, and refusals."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from upsertmat.impls.lifecycle import (
    Savepoint,
    SavepointError,
    SavepointMismatch,
    load_savepoint,
    read_manifest,
    save_savepoint,
)
from upsertmat.impls.settings import TtlSettings
from upsertmat.spec import CaseInsensitiveEqualizer, IgnoreColumnsEqualizer, Keys, Materializer

from .support import IMPLEMENTATIONS, NO_UPSERT_KEY, UPSERT_KEY, make, mixed_stream, model_outputs, outputs

CUT = 40
LENGTH = 80


@pytest.fixture(scope="module", params=[NO_UPSERT_KEY, UPSERT_KEY], ids=["no-uk", "uk"])
def savepoints(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Keys, dict[str, Path]]]:
    """One savepoint per implementation, taken after the first CUT inputs of the stream."""
    keys: Keys = request.param
    changes = mixed_stream(3, LENGTH, keys)
    root = tmp_path_factory.mktemp("savepoints")
    paths: dict[str, Path] = {}
    for name in IMPLEMENTATIONS:
        source = make(name, keys)
        try:
            assert outputs(source, changes[:CUT]) == model_outputs(keys, changes)[:CUT]
            paths[name] = root / name.replace("/", "-")
            save_savepoint(paths[name], source, keys=keys, source={"implementation": name})
        finally:
            source.close()
    yield keys, paths


@pytest.mark.parametrize("target", IMPLEMENTATIONS)
def test_a_savepoint_of_every_implementation_restores_into_every_other(
    savepoints: tuple[Keys, dict[str, Path]], target: str
) -> None:
    keys, paths = savepoints
    changes = mixed_stream(3, LENGTH, keys)
    expected = model_outputs(keys, changes)[CUT:]
    for source, path in paths.items():
        restored = make(target, keys)
        try:
            load_savepoint(path, restored, keys=keys)
            assert outputs(restored, changes[CUT:]) == expected, f"{source} -> {target}"
        finally:
            restored.close()


def test_savepoints_of_all_implementations_hold_the_same_data(
    savepoints: tuple[Keys, dict[str, Path]],
) -> None:
    _keys, paths = savepoints
    contents = {name: sorted(Savepoint.open(path).entries()) for name, path in paths.items()}
    reference = contents.pop(IMPLEMENTATIONS[0])
    assert reference, "the stream left no state; the test would prove nothing"
    for name, content in contents.items():
        assert [(c, [row for row, _ in e]) for c, e in content] == [
            (c, [row for row, _ in e]) for c, e in reference
        ], name


def _taken(tmp_path: Path, keys: Keys = UPSERT_KEY, name: str = "MAP/heap") -> Path:
    source = make(name, keys)
    try:
        outputs(source, mixed_stream(5, 60, keys))
        save_savepoint(tmp_path / "sp", source, keys=keys)
    finally:
        source.close()
    return tmp_path / "sp"


def _restore(path: Path, keys: Keys = UPSERT_KEY, **options: object) -> None:
    target: Materializer = make("VALUE/heap", keys)
    try:
        load_savepoint(path, target, keys=keys, **options)  # type: ignore[arg-type]
    finally:
        target.close()


def _rewrite_manifest(path: Path, edit: dict[str, object]) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    manifest.update(edit)
    (path / "manifest.json").write_text(json.dumps(manifest))


def _data_file(path: Path) -> Path:
    return path / read_manifest(path).files[0].name


def _fix_checksum(path: Path, data_file: Path) -> None:
    manifest = json.loads((path / "manifest.json").read_text())
    for entry in manifest["files"]:
        if entry["name"] == data_file.name:
            entry["sha256"] = hashlib.sha256(data_file.read_bytes()).hexdigest()
            entry["bytes"] = data_file.stat().st_size
    (path / "manifest.json").write_text(json.dumps(manifest))


def test_manifest_records_identity_and_files(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    manifest = json.loads((path / "manifest.json").read_text())
    assert (manifest["format"], manifest["version"], manifest["max_parallelism"]) == (
        "upsertmat-savepoint",
        1,
        128,
    )
    assert manifest["equalizer"]["name"] == "canonical"
    assert manifest["pk"] == [0] and manifest["upsert_key"] == [1]
    for entry in manifest["files"]:
        data = (path / entry["name"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"])


def test_an_existing_path_is_not_overwritten(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    with pytest.raises(SavepointError, match="already exists"):
        save_savepoint(path, make("MAP/heap", UPSERT_KEY), keys=UPSERT_KEY)


def test_a_different_equalizer_is_refused_naming_both(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    other = Keys(pk=(0,), upsert_key=(1,), equalizer=CaseInsensitiveEqualizer())
    with pytest.raises(SavepointMismatch) as error:
        _restore(path, other)
    message = str(error.value)
    assert "equalizer canonical (fingerprint" in message and "case-insensitive (fingerprint" in message


def test_ignore_columns_parameters_are_part_of_the_identity(tmp_path: Path) -> None:
    keys = Keys(pk=(0,), equalizer=IgnoreColumnsEqualizer([3]))
    path = _taken(tmp_path, keys)
    _restore(path, keys)
    with pytest.raises(SavepointMismatch, match=r"ignore-columns:3 .* ignore-columns:2"):
        _restore(path, Keys(pk=(0,), equalizer=IgnoreColumnsEqualizer([2])))


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (Keys(pk=(0,)), "upsert key columns \\[1\\] but the restore uses \\[\\]"),
        (Keys(pk=(1,), upsert_key=(1,)), "pk"),
    ],
)
def test_other_keys_are_refused(tmp_path: Path, keys: Keys, message: str) -> None:
    path = _taken(tmp_path)
    with pytest.raises(SavepointMismatch, match=message):
        _restore(path, keys)


def test_other_ttl_settings_are_refused(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    with pytest.raises(SavepointMismatch, match="TTL off but the restore uses 1000 ms"):
        _restore(path, ttl=TtlSettings(ttl_ms=1000))


def test_an_unknown_format_version_is_refused(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    _rewrite_manifest(path, {"version": 7})
    with pytest.raises(SavepointError, match="format version 7; this upsertmat reads version 1 only"):
        _restore(path)


def test_a_foreign_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "manifest.json").write_text('{"format": "flink-savepoint"}')
    with pytest.raises(SavepointError, match="is not an upsertmat savepoint manifest"):
        _restore(tmp_path / "x")
    with pytest.raises(SavepointError, match=r"has no manifest\.json"):
        _restore(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda data: data[:-3], "\\d+ bytes, the manifest says .* \\(truncated or extended\\)"),
        (lambda data: data[:-1] + bytes([data[-1] ^ 1]), "its SHA-256 differs"),
        (lambda data: data + b"\x00", ".*truncated or extended"),
    ],
)
def test_a_tampered_or_truncated_data_file_is_refused(tmp_path: Path, edit: object, message: str) -> None:
    path = _taken(tmp_path)
    data_file = _data_file(path)
    data_file.write_bytes(edit(data_file.read_bytes()))  # type: ignore[operator]
    with pytest.raises(SavepointError, match=f"damaged savepoint file {data_file}: {message}"):
        _restore(path)


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        # an extension type (what a code-executing format would need) is refused outright
        (msgpack.packb(msgpack.ExtType(42, b"os.system('touch pwned')")), "extension type 42 is not allowed"),
        (msgpack.packb({"format": "upsertmat-savepoint-data", "version": 1, "key_group": 0}), "header"),
        (b"\xc1\xc1\xc1", "undecodable|header"),
        (b"", "header None"),
    ],
)
def test_foreign_content_with_a_matching_checksum_is_refused_and_never_run(
    tmp_path: Path, payload: bytes, message: str
) -> None:
    path = _taken(tmp_path)
    data_file = _data_file(path)
    data_file.write_bytes(payload)
    _fix_checksum(path, data_file)
    with pytest.raises(SavepointError, match=f"damaged savepoint file {data_file}: .*({message})"):
        _restore(path)
    assert not (Path.cwd() / "pwned").exists()


def test_a_row_under_a_foreign_context_key_is_refused(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    data_file = _data_file(path)
    objects = list(msgpack.Unpacker(open(data_file, "rb"), raw=False))  # noqa: SIM115
    _context, elements = objects[1]
    row = json.loads(elements[0][0])
    row[0] = 12345
    elements[0][0] = json.dumps(row)
    data_file.write_bytes(b"".join(msgpack.packb(obj, use_bin_type=True) for obj in objects))
    _fix_checksum(path, data_file)
    with pytest.raises(SavepointError, match="which is not its own"):
        _restore(path)


def test_a_missing_data_file_is_refused(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    data_file = _data_file(path)
    data_file.unlink()
    with pytest.raises(SavepointError, match=f"lacks its data file {data_file.name}"):
        _restore(path)


def test_nothing_is_imported_when_a_later_file_is_damaged(tmp_path: Path) -> None:
    path = _taken(tmp_path)
    last = path / read_manifest(path).files[-1].name
    last.write_bytes(last.read_bytes()[:-1])
    target = make("VALUE/heap", UPSERT_KEY)
    try:
        with pytest.raises(SavepointError):
            load_savepoint(path, target, keys=UPSERT_KEY)
        assert list(target.histories()) == []  # type: ignore[attr-defined]
    finally:
        target.close()
