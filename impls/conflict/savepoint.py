"""Savepoints of the compacting materializer: backend-independent, rescalable, safe to load.

Layout of a savepoint directory ``SP``::

    manifest.json     format, version, keys, equalizer identity, behaviour, last watermark,
                      max parallelism, key count, and the data file's size and SHA-256
    state.msgpack     a msgpack stream: a header map, one entry per key holding state,
                      ascending by context key, and a trailer ``{"end": count}``

An entry is ``[context key (bin), key group, current row (JSON text or nil), [[is_add,
row JSON text], ...]]``: the state :meth:`~.materializer.CompactingMaterializer.export_keys`
yields (pending changes after rule C1, in arrival order). Rows are JSON text, which keeps
every JSON type exactly. Nothing depends on the backend that wrote it, so any backend restores
it (migration), and an instance ``i`` of ``q`` restores only the keys of its key-group range
(rescaling, Flink's scheme: :mod:`upsertmat.impls.lifecycle.keygroups`).

ERROR and NOTHING keep the same state, so a savepoint of one restores under the other; a
savepoint for other keys or another equalizer is refused (:class:`SavepointMismatch`), and any
damage (size, checksum, header, an entry's shape, a key group or context key that does not
match its rows, the trailer's count) raises :class:`SavepointError` before anything is
imported. Loading never executes code (JSON, and msgpack without extension types).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ...spec import Keys, Row, equalizer_spec
from ..documents import Fields, check_header
from ..lifecycle import codec
from ..lifecycle.errors import SavepointError, SavepointMismatch
from ..lifecycle.keygroups import DEFAULT_MAX_PARALLELISM, key_group, key_group_range
from ..lifecycle.savepoint import MAX_MANIFEST_BYTES, open_savepoint_file, savepoint_read_failure
from .materializer import CompactingMaterializer

FORMAT = "upsertmat-conflict-savepoint"
VERSION = 1
MANIFEST = "manifest.json"
DATA = "state.msgpack"
KeyState = tuple[bytes, Row | None, list[tuple[bool, Row]]]


def _identity(keys: Keys) -> dict[str, Any]:
    return {
        "pk": list(keys.pk),
        "upsert_key": list(keys.upsert_key),
        "equalizer": equalizer_spec(keys.equalizer),
        "equalizer_fingerprint": keys.equalizer.fingerprint,
    }


def write_savepoint(
    materializer: CompactingMaterializer, path: Path, *, max_parallelism: int = DEFAULT_MAX_PARALLELISM
) -> None:
    """Write ``materializer``'s state to the new directory ``path`` (the manifest last). O(state)."""
    path.mkdir(parents=True)
    data = path / DATA
    count = 0
    with open(data, "wb") as stream:
        packer = codec.packer()
        stream.write(packer.pack({"format": FORMAT, "version": VERSION}))
        for context, current, pending in materializer.export_keys():
            entry = [
                context,
                key_group(context, max_parallelism),
                None if current is None else codec.encode_row(current),
                [[is_add, codec.encode_row(row)] for is_add, row in pending],
            ]
            stream.write(packer.pack(entry))
            count += 1
        stream.write(packer.pack({"end": count}))
        stream.flush()
        os.fsync(stream.fileno())
    digest, size = _sha256_and_size(data)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        **_identity(materializer.keys),
        "behavior": materializer.behavior.value,
        "watermark": materializer.last_watermark,
        "max_parallelism": max_parallelism,
        "keys": count,
        "data": {"name": DATA, "bytes": size, "sha256": digest},
    }
    (path / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


def _sha256_and_size(path: Path) -> tuple[str, int]:
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
            size += len(chunk)
    return digest.hexdigest(), size


def read_manifest(path: Path) -> dict[str, Any]:
    """The validated manifest of the savepoint at ``path``. SavepointError if unusable (read as
    carefully as the canonical savepoint's: a regular file of bounded size, bounded nesting,
    every field checked by the one field checker)."""
    where = path / MANIFEST
    try:
        with open_savepoint_file(where, "savepoint manifest", MAX_MANIFEST_BYTES) as stream:
            raw = stream.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise SavepointError(f"{path} is not a savepoint: it has no {MANIFEST}") from None
    except OSError as error:
        raise savepoint_read_failure(error, f"cannot read the savepoint manifest {where}") from None
    try:
        manifest = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise SavepointError(
            f"cannot read the savepoint manifest {where}: not valid JSON ({reason})"
        ) from None

    def bad(what: str) -> SavepointError:
        return SavepointError(f"{where}: damaged manifest: {what}")

    document = check_header(
        manifest,
        FORMAT,
        VERSION,
        lambda: SavepointError(f"{where} is not an ON CONFLICT savepoint (format {FORMAT!r} expected)"),
        lambda found: SavepointError(f"{where}: unknown version {found!r} (this build reads {VERSION})"),
    )
    read = Fields(document, bad)
    data = Fields(read.mapping("data"), lambda what: bad(f"data: {what}"))
    if data.text("name") != DATA:
        raise bad(f"data: 'name' must be {DATA!r}")
    data.natural("bytes")
    data.text("sha256")
    read.integer("watermark", nullable=True)  # the library's clock may be set below 0
    read.natural("max_parallelism", minimum=1)
    read.natural("keys")
    return document


def load_savepoint(
    path: Path, keys: Keys, *, index: int = 0, parallelism: int = 1
) -> tuple[int | None, list[KeyState]]:
    """The last watermark and the key states of instance ``index`` of ``parallelism``.

    Everything is validated first (see the module docstring); O(savepoint size).
    """
    manifest = read_manifest(path)
    for field, ours in _identity(keys).items():
        if manifest.get(field) != ours:
            raise SavepointMismatch(
                f"the savepoint's {field} is {manifest.get(field)!r}, this operator's is {ours!r}"
            )
    max_parallelism: int = manifest["max_parallelism"]
    groups = key_group_range(index, parallelism, max_parallelism)
    data = path / DATA
    try:
        with open_savepoint_file(data, "savepoint data file") as stream:
            if os.fstat(stream.fileno()).st_size != manifest["data"]["bytes"]:
                raise SavepointError(
                    f"{data}: size or SHA-256 differs from the manifest (damaged or replaced)"
                )
            digest = hashlib.sha256()
            while chunk := stream.read(1 << 20):
                digest.update(chunk)
            if digest.hexdigest() != manifest["data"]["sha256"]:
                raise SavepointError(
                    f"{data}: size or SHA-256 differs from the manifest (damaged or replaced)"
                )
            stream.seek(0)
            items = [entry for entry in _entries(stream, data, keys, max_parallelism) if entry[0] in groups]
    except FileNotFoundError:
        raise SavepointError(f"savepoint {path} lacks its data file {DATA}") from None
    except OSError as error:
        raise savepoint_read_failure(error, f"cannot read {data}") from None
    return manifest["watermark"], [state for _, state in items]


def _entries(
    stream: IO[bytes], data: Path, keys: Keys, max_parallelism: int
) -> Iterator[tuple[int, KeyState]]:
    unpacked = codec.unpacker(stream)
    try:
        header = next(unpacked)
        if header != {"format": FORMAT, "version": VERSION}:
            raise SavepointError(f"{data}: bad header {header!r}")
        for count, entry in enumerate(unpacked):
            if isinstance(entry, dict):
                if entry != {"end": count}:
                    raise SavepointError(f"{data}: trailer {entry!r} does not match {count} entries")
                return
            yield _decode(entry, keys, max_parallelism, data)
    except SavepointError:
        raise
    except RecursionError:
        raise SavepointError(f"{data}: damaged data: a value is nested too deeply") from None
    except (ValueError, TypeError, StopIteration) as error:
        raise SavepointError(f"{data}: damaged data: {error}") from None
    raise SavepointError(f"{data}: no trailer (truncated)")


def _decode(entry: object, keys: Keys, max_parallelism: int, data: Path) -> tuple[int, KeyState]:
    if not (isinstance(entry, list) and len(entry) == 4 and isinstance(entry[0], bytes)):
        raise SavepointError(f"{data}: an entry is not [context, key group, current, pending]")
    context, group, current_text, pending_list = entry
    if group != key_group(context, max_parallelism):
        raise SavepointError(f"{data}: key group {group!r} of a context key is wrong")
    current = None if current_text is None else codec.decode_row(current_text)
    if not isinstance(pending_list, list):
        raise SavepointError(f"{data}: pending changes are not a list")
    pending: list[tuple[bool, Row]] = []
    for item in pending_list:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], bool)):
            raise SavepointError(f"{data}: a pending change is not [is_add, row]")
        pending.append((item[0], codec.decode_row(item[1])))
    for row in ([current] if current is not None else []) + [row for _, row in pending]:
        if keys.context_key(row) != context:
            raise SavepointError(f"{data}: a row does not belong to its context key")
    return group, (context, current, pending)


def restore_savepoint(
    materializer: CompactingMaterializer, path: Path, *, index: int = 0, parallelism: int = 1
) -> None:
    """Import instance ``index`` of ``parallelism``'s share of the savepoint into ``materializer``."""
    watermark, items = load_savepoint(path, materializer.keys, index=index, parallelism=parallelism)
    materializer.import_keys(items, watermark)
