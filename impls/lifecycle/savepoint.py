"""The canonical, backend-independent savepoint: a directory of a manifest and data files.

Layout of a savepoint directory ``SP``::

    manifest.json            format, version, keys, equalizer identity, TTL settings, clock,
                             max parallelism, the data files with sizes and SHA-256 (last written)
    kg-00017.msgpack         the context keys of key group 17 (only non-empty groups)

Each data file (:mod:`.codec`) holds, for every context key of its key group, the elements
``(row, stamp)`` in insertion order. Nothing in a savepoint depends on the strategy or the
backend that wrote it, so any registered implementation restores it (migration), and any
parallelism up to the max parallelism restores it by key-group ranges (rescaling).

Reading validates everything before handing out a single element, as carefully as a state
directory is read: only regular files are opened (a FIFO, a device, a symlink to one is
refused before anything is read, and nothing blocks), sizes are checked before reading (the
manifest at most 64 MiB, a data file exactly the size its manifest lists), nesting is bounded;
then the manifest's format, version and every field (through the one field checker,
:mod:`upsertmat.impls.documents`: the keys, an equalizer this upsertmat knows with the same
fingerprint, the TTL settings, and the replay position ``extra.lines``/``arity``/``runs``), so
a savepoint that :meth:`Savepoint.verify` accepts is one a restore accepts; every listed
file's name, size and SHA-256; every data file's header, entries, key groups and context keys
(recomputed from the rows); the trailer's count. Any deviation raises :class:`SavepointError`
naming the file and what differs (:class:`SavepointIOError` when the file system fails); a
savepoint for other keys, another equalizer or other TTL settings raises
:class:`SavepointMismatch` naming both sides. Loading never executes code (JSON + msgpack
with strict limits).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from ...spec import Element, Equalizer, Keys, Materializer, equalizer_spec, parse_equalizer
from ..documents import Fields, RunRecord, check_header, is_natural, runs_of, ttl_settings_of
from ..settings import MAX_TIME_MS, TtlSettings
from ..state.errors import CorruptStateError, StorageError, os_failure
from ..state.files import fsync_directory, open_regular
from . import codec
from .errors import SavepointError, SavepointIOError, SavepointMismatch
from .keygroups import DEFAULT_MAX_PARALLELISM, MAX_MAX_PARALLELISM, Partition, key_group, key_group_range
from .transfer import clock_of, export_state, import_state

FORMAT = "upsertmat-savepoint"
VERSION = 1
DATA_FORMAT = "upsertmat-savepoint-data"
MANIFEST_NAME = "manifest.json"
_DATA_NAME = re.compile(r"^kg-(\d{5})\.msgpack$")
MAX_MANIFEST_BYTES = 64 << 20


@dataclass(frozen=True)
class DataFile:
    """One data file of a savepoint: its key group, counts, size and checksum."""

    name: str
    key_group: int
    keys: int
    elements: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class EqualizerIdentity:
    """What identifies an equalizer: name, configuration spec and fingerprint."""

    name: str
    spec: str
    fingerprint: str

    @classmethod
    def of(cls, equalizer: Equalizer) -> EqualizerIdentity:
        """The identity of a live equalizer."""
        return cls(equalizer.name, equalizer_spec(equalizer), equalizer.fingerprint)

    def __str__(self) -> str:
        return f"{self.spec} (fingerprint {self.fingerprint})"


@dataclass(frozen=True)
class ReplayExtra:
    """What ``upsertmat savepoint`` keeps in a manifest's ``extra`` for ``restore``: the stream
    position (``lines``: the stream index the restored state continues at), the stream's
    ``arity`` (None: not fixed yet), the completed ``runs`` (so reruns stay recognisable) and,
    for a savepoint of one instance of several, its ``partition`` (the key groups it holds;
    None: all). Absent fields (a library savepoint) mean 0, None, none and None."""

    lines: int = 0
    arity: int | None = None
    runs: tuple[RunRecord, ...] = ()
    partition: Partition | None = None


def replay_extra(extra: dict[str, Any], bad: Callable[[str], Exception]) -> ReplayExtra:
    """The :class:`ReplayExtra` of a manifest's ``extra``, each field checked by the one field
    checker; ``bad(what)`` builds the error for the first invalid one."""
    read = Fields(extra, lambda what: bad(f"extra: {what}"))
    lines = read.natural("lines", default=0)
    arity = read.natural("arity", minimum=1, nullable=True)
    runs = runs_of(read.sequence("runs", default=[]), lambda what: bad(f"extra: {what}"))
    partition = None
    if extra.get("partition") is not None:
        try:
            partition = Partition.from_json(extra["partition"])
        except ValueError as error:
            raise bad(f"extra: {error}") from None
    return ReplayExtra(lines, arity, runs, partition)


@dataclass(frozen=True)
class SavepointManifest:
    """The validated content of ``manifest.json``.

    ``ttl``: the TTL settings in force when the savepoint was taken (stamps mean write times
    or event times accordingly). ``now``: the clock. ``retract_misses``: rule-7 count so far
    (informational). ``source``: who wrote it (strategy, backend, parallelism) — informational.
    ``extra``: a free JSON object for tools (``replay`` keeps its line count there).
    """

    pk: tuple[int, ...]
    upsert_key: tuple[int, ...]
    equalizer: EqualizerIdentity
    ttl: TtlSettings
    now: int
    max_parallelism: int
    files: tuple[DataFile, ...]
    retract_misses: int = 0
    source: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def replay(self) -> ReplayExtra:
        """The replay position ``extra`` holds (checked when the manifest was read). O(runs)."""
        return replay_extra(self.extra, SavepointError)

    @property
    def keys(self) -> Keys:
        """The keys the savepoint was taken with (the equalizer checked when it was read)."""
        return Keys(pk=self.pk, upsert_key=self.upsert_key, equalizer=parse_equalizer(self.equalizer.spec))

    @property
    def key_count(self) -> int:
        """Context keys over all data files."""
        return sum(data.keys for data in self.files)

    @property
    def element_count(self) -> int:
        """Elements over all data files."""
        return sum(data.elements for data in self.files)

    def to_json(self) -> dict[str, Any]:
        """The manifest as a JSON object."""
        return {
            "format": FORMAT,
            "version": VERSION,
            "pk": list(self.pk),
            "upsert_key": list(self.upsert_key),
            "equalizer": asdict(self.equalizer),
            "ttl": {
                "ttl_ms": self.ttl.ttl_ms,
                "time_domain": self.ttl.time_domain.value,
                "update_type": self.ttl.update_type.value,
            },
            "now": self.now,
            "max_parallelism": self.max_parallelism,
            "retract_misses": self.retract_misses,
            "source": self.source,
            "extra": self.extra,
            "files": [asdict(data) for data in self.files],
        }

    def check_compatible(self, keys: Keys, ttl: TtlSettings | None, where: Path) -> None:
        """SavepointMismatch naming both sides unless ``keys`` (and ``ttl``) fit this savepoint."""
        wanted = EqualizerIdentity.of(keys.equalizer)
        if wanted.fingerprint != self.equalizer.fingerprint or wanted.name != self.equalizer.name:
            raise SavepointMismatch(
                f"savepoint {where} was taken with equalizer {self.equalizer} but the restore uses "
                f"{wanted}; restore with the savepoint's equalizer "
                f"(upsertmat.equalizer={self.equalizer.spec})"
            )
        for what, ours, theirs in (
            ("pk", keys.pk, self.pk),
            ("upsert key", keys.upsert_key, self.upsert_key),
        ):
            if tuple(ours) != tuple(theirs):
                raise SavepointMismatch(
                    f"savepoint {where} has {what} columns {list(theirs)} but the restore uses {list(ours)}"
                )
        if ttl is not None and ttl != self.ttl:
            raise SavepointMismatch(
                f"savepoint {where} was taken with TTL {_ttl_text(self.ttl)} but the restore uses "
                f"{_ttl_text(ttl)}; stamps would change meaning"
            )


def _ttl_text(ttl: TtlSettings) -> str:
    if not ttl.enabled:
        return "off"
    return f"{ttl.ttl_ms} ms ({ttl.time_domain.value}, {ttl.update_type.value})"


# -- writing ---------------------------------------------------------------------------------


def _write_data_file(path: Path, group: int, entries: list[tuple[bytes, list[Element]]]) -> DataFile:
    pack = codec.packer().pack
    hasher = hashlib.sha256()
    size = elements = 0
    with open(path, "wb") as stream:
        for obj in (
            {"format": DATA_FORMAT, "version": VERSION, "key_group": group},
            *(codec.pack_entry(context, items) for context, items in entries),
            {"end": len(entries)},
        ):
            data = pack(obj)
            hasher.update(data)
            stream.write(data)
            size += len(data)
        stream.flush()
        os.fsync(stream.fileno())
    elements = sum(len(items) for _, items in entries)
    return DataFile(path.name, group, len(entries), elements, size, hasher.hexdigest())


def write_savepoint(
    path: Path,
    items: Iterable[tuple[bytes, list[Element]]],
    *,
    keys: Keys,
    now: int,
    ttl: TtlSettings | None = None,
    max_parallelism: int = DEFAULT_MAX_PARALLELISM,
    retract_misses: int = 0,
    source: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> SavepointManifest:
    """Write ``items`` (context key, elements in insertion order) as a savepoint at ``path``.

    ``path`` must not exist; the savepoint is built in a temporary sibling directory (every
    file fsynced, manifest last) and renamed into place, so ``path`` is complete or absent
    (also when this raises: what was written is removed). What a reader would refuse is not
    written: a max parallelism beyond :data:`~.keygroups.MAX_MAX_PARALLELISM`, a clock or a
    stamp beyond :data:`~upsertmat.impls.settings.MAX_TIME_MS`.
    A context key given twice is an error. O(state size); holds the entries in memory
    grouped by key group.
    """
    path = Path(path)
    if path.exists():
        raise SavepointError(f"savepoint {path} already exists; choose a new path")
    if not 1 <= max_parallelism <= MAX_MAX_PARALLELISM:
        raise SavepointError(
            f"max parallelism must be between 1 and {MAX_MAX_PARALLELISM}, got {max_parallelism}"
        )
    if not 0 <= now <= MAX_TIME_MS:
        raise SavepointError(f"the clock must be between 0 and {MAX_TIME_MS} ms, got {now}")
    groups: dict[int, list[tuple[bytes, list[Element]]]] = {}
    seen: set[bytes] = set()
    for context, elements in items:
        if not elements:
            continue
        if context in seen:
            raise SavepointError(f"context key {context!r} is exported twice; refusing to write {path}")
        seen.add(context)
        groups.setdefault(key_group(context, max_parallelism), []).append((context, list(elements)))
    path.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        files = tuple(
            _write_data_file(building / f"kg-{group:05d}.msgpack", group, groups[group])
            for group in sorted(groups)
        )
        manifest = SavepointManifest(
            pk=keys.pk,
            upsert_key=keys.upsert_key,
            equalizer=EqualizerIdentity.of(keys.equalizer),
            ttl=ttl or TtlSettings(),
            now=now,
            max_parallelism=max_parallelism,
            files=files,
            retract_misses=retract_misses,
            source=dict(source or {}),
            extra=dict(extra or {}),
        )
        text = json.dumps(manifest.to_json(), indent=2) + "\n"
        with open(building / MANIFEST_NAME, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        fsync_directory(building)
        os.rename(building, path)
        building = path  # from here on a failure removes the savepoint: it is not known durable
        fsync_directory(path.parent)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    return manifest


def save_savepoint(
    path: Path,
    instances: Materializer | Sequence[Materializer],
    *,
    keys: Keys,
    ttl: TtlSettings | None = None,
    max_parallelism: int = DEFAULT_MAX_PARALLELISM,
    source: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> SavepointManifest:
    """Savepoint of one materializer, or of the ``p`` instances of a parallel operator.

    Each instance exports through StateTransfer (or HistoryAccess); the clock is the greatest
    of theirs. A context key held by two instances is refused.
    """
    group = [instances] if isinstance(instances, Materializer) else list(instances)
    if not group:
        raise SavepointError("no materializer to take a savepoint of")

    def items() -> Iterator[tuple[bytes, list[Element]]]:
        for instance in group:
            yield from export_state(instance)

    return write_savepoint(
        path,
        items(),
        keys=keys,
        now=max(clock_of(instance) for instance in group),
        ttl=ttl,
        max_parallelism=max_parallelism,
        retract_misses=sum(instance.retract_misses for instance in group),
        source={"parallelism": len(group), **(source or {})},
        extra=extra,
    )


# -- reading ---------------------------------------------------------------------------------


def _parse_manifest(data: object, where: Path) -> SavepointManifest:
    def bad(what: str) -> SavepointError:
        return SavepointError(f"damaged savepoint manifest {where}: {what}; refusing to restore from it")

    data = check_header(
        data,
        FORMAT,
        VERSION,
        lambda: SavepointError(
            f"{where} is not an upsertmat savepoint manifest (expected format {FORMAT!r})"
        ),
        lambda found: SavepointError(
            f"savepoint {where} has format version {found!r}; this upsertmat reads version {VERSION} only"
        ),
    )
    read = Fields(data, bad)
    pk, upsert_key = read.columns("pk", non_empty=True), read.columns("upsert_key")
    equalizer = data.get("equalizer")
    if not (isinstance(equalizer, dict) and set(equalizer) == {"name", "spec", "fingerprint"}) or not all(
        isinstance(value, str) for value in equalizer.values()
    ):
        raise bad("'equalizer' must be {name, spec, fingerprint} strings")
    try:
        live = parse_equalizer(equalizer["spec"])  # a closed list of names: never imports code
        Keys(pk=pk, upsert_key=upsert_key, equalizer=live)
    except ValueError as error:
        raise bad(str(error)) from None
    if live.name != equalizer["name"] or live.fingerprint != equalizer["fingerprint"]:
        raise SavepointError(
            f"savepoint {where} records equalizer {equalizer['spec']} ({equalizer['name']}) with fingerprint "
            f"{equalizer['fingerprint']}, but this upsertmat's {equalizer['spec']} is {live.name} with "
            f"fingerprint {live.fingerprint}; refusing to mix them"
        )
    shape = "'ttl' must be {ttl_ms, time_domain, update_type} with known values"
    try:
        ttl_settings = ttl_settings_of(data.get("ttl"), shape)
    except ValueError as error:
        raise bad(str(error) if "at most" in str(error) else shape) from None
    now, retract_misses = read.natural("now", maximum=MAX_TIME_MS), read.natural("retract_misses")
    max_parallelism = read.natural("max_parallelism", minimum=1, maximum=MAX_MAX_PARALLELISM)
    source, extra = read.mapping("source"), read.mapping("extra")
    replay = replay_extra(extra, bad)
    needed = max((*pk, *upsert_key)) + 1
    if replay.arity is not None and replay.arity < needed:
        raise bad(
            f"extra: an 'arity' of {replay.arity} leaves out key column {needed - 1} (columns count from 0)"
        )
    if replay.partition is not None and replay.partition.max_parallelism != max_parallelism:
        raise bad(
            f"extra: 'partition' is of {replay.partition.max_parallelism} key groups but "
            f"'max_parallelism' is {max_parallelism}"
        )
    raw_files = read.sequence("files")
    files: list[DataFile] = []
    groups: set[int] = set()
    for raw in raw_files:
        if not (isinstance(raw, dict) and set(raw) == set(DataFile.__dataclass_fields__)):
            raise bad(f"a file entry must have exactly {sorted(DataFile.__dataclass_fields__)}")
        name = raw["name"]
        match = _DATA_NAME.match(name) if isinstance(name, str) else None
        if match is None:
            raise bad(f"file name {name!r} is not kg-NNNNN.msgpack")
        if not all(is_natural(raw[n]) for n in ("key_group", "keys", "elements", "bytes")):
            raise bad(f"file {name}: counts must be non-negative integers")
        if raw["key_group"] != int(match.group(1)) or raw["key_group"] >= max_parallelism:
            raise bad(
                f"file {name}: key group {raw['key_group']} does not fit its name or the max parallelism"
            )
        if raw["key_group"] in groups:
            raise bad(f"key group {raw['key_group']} is listed twice")
        if replay.partition is not None and raw["key_group"] not in replay.partition.groups:
            raise bad(f"file {name}: key group {raw['key_group']} is not one of {replay.partition}")
        if not (isinstance(raw["sha256"], str) and re.fullmatch(r"[0-9a-f]{64}", raw["sha256"])):
            raise bad(f"file {name}: 'sha256' must be 64 hex digits")
        groups.add(raw["key_group"])
        files.append(DataFile(**raw))
    return SavepointManifest(
        pk=pk,
        upsert_key=upsert_key,
        equalizer=EqualizerIdentity(**equalizer),
        ttl=ttl_settings,
        now=now,
        max_parallelism=max_parallelism,
        files=tuple(files),
        retract_misses=retract_misses,
        source=source,
        extra=extra,
    )


def read_manifest(path: Path) -> SavepointManifest:
    """The validated manifest of the savepoint directory ``path``. SavepointError otherwise
    (SavepointIOError when the file system fails)."""
    path = Path(path)
    where = path / MANIFEST_NAME
    try:
        if not path.is_dir():
            raise SavepointError(f"savepoint {path} is not a directory")
        with open_savepoint_file(where, "savepoint manifest", MAX_MANIFEST_BYTES) as stream:
            raw = stream.read(MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise SavepointError(f"{path} is not a savepoint: it has no {MANIFEST_NAME}") from None
    except OSError as error:
        raise savepoint_read_failure(error, f"cannot read {where}") from None
    if len(raw) > MAX_MANIFEST_BYTES:  # it grew after the size check
        raise SavepointError(
            f"savepoint manifest {where} is larger than {MAX_MANIFEST_BYTES} bytes; refusing it"
        )
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise SavepointError(f"damaged savepoint manifest {where}: not valid JSON ({reason})") from None
    return _parse_manifest(data, where)


def open_savepoint_file(path: Path, what: str, limit: int | None = None) -> IO[bytes]:
    """A file of a savepoint (this format's or the ``ON CONFLICT`` one's), ``path``, opened for
    reading if it is a regular file of at most ``limit`` bytes
    (:func:`~upsertmat.impls.state.files.open_regular`: never blocks on a FIFO, never reads a
    device); SavepointError naming it otherwise. OSErrors of ``open`` propagate."""
    try:
        return open_regular(path, what, limit)
    except CorruptStateError as error:
        raise SavepointError(str(error).removeprefix("damaged state: ")) from None


def savepoint_read_failure(error: OSError, what: str) -> SavepointError:
    """An OSError while reading a savepoint: a device error is a SavepointIOError."""
    failure = os_failure(error, what)
    return (
        SavepointIOError(str(failure)) if isinstance(failure, StorageError) else SavepointError(str(failure))
    )


def _read_data_file(
    directory: Path, data: DataFile, manifest: SavepointManifest, keys: Keys | None
) -> list[tuple[bytes, list[Element]]]:
    """The entries of one data file: a regular file of the listed size (checked before
    reading) and SHA-256, then decoded; all read through one descriptor."""
    where = directory / data.name
    try:
        with open_savepoint_file(where, "savepoint data file") as stream:
            size = os.fstat(stream.fileno()).st_size
            if size != data.bytes:
                raise SavepointError(
                    f"damaged savepoint file {where}: {size} bytes, the manifest says {data.bytes} "
                    "(truncated or extended)"
                )
            hasher = hashlib.sha256()
            for block in iter(lambda: stream.read(1 << 20), b""):
                hasher.update(block)
            if hasher.hexdigest() != data.sha256:
                raise SavepointError(
                    f"damaged savepoint file {where}: its SHA-256 differs from the manifest's"
                )
            stream.seek(0)
            try:
                return _decode_entries(stream, data, manifest, keys)
            except (ValueError, RecursionError) as error:
                detail = str(error) or f"undecodable ({type(error).__name__})"
                if isinstance(error, RecursionError):
                    detail = "a value is nested too deeply"
                raise SavepointError(
                    f"damaged savepoint file {where}: {detail}; refusing to restore from it"
                ) from None
            except OSError:
                raise
            except Exception as error:  # msgpack raises several unrelated types on malformed input
                raise SavepointError(f"damaged savepoint file {where}: undecodable ({error})") from None
    except FileNotFoundError:
        raise SavepointError(f"savepoint {directory} lacks its data file {data.name}") from None
    except OSError as error:
        raise savepoint_read_failure(error, f"cannot read {where}") from None


def _decode_entries(
    stream: Any, data: DataFile, manifest: SavepointManifest, keys: Keys | None
) -> list[tuple[bytes, list[Element]]]:
    objects = codec.unpacker(stream)
    header = next(objects, None)
    expected = {"format": DATA_FORMAT, "version": VERSION, "key_group": data.key_group}
    if header != expected:
        raise ValueError(f"header {header!r} is not {expected!r}")
    entries: list[tuple[bytes, list[Element]]] = []
    arity = manifest.replay.arity
    for obj in objects:
        if isinstance(obj, dict):
            if obj != {"end": len(entries)} or next(objects, None) is not None:
                raise ValueError("bad trailer")
            break
        context, elements = codec.unpack_entry(obj)
        if key_group(context, manifest.max_parallelism) != data.key_group:
            raise ValueError(f"context key {context!r} does not belong to key group {data.key_group}")
        for row, _ in elements if arity is not None else ():
            if len(row) != arity:
                raise ValueError(f"a row has {len(row)} column(s) but the manifest's extra.arity is {arity}")
        if keys is not None:
            for row, _ in elements:
                if keys.context_key(row) != context:
                    raise ValueError(f"a row is stored under context key {context!r}, which is not its own")
        entries.append((context, elements))
    else:
        raise ValueError("truncated (no trailer)")
    if len(entries) != data.keys or sum(len(items) for _, items in entries) != data.elements:
        raise ValueError("its key or element count differs from the manifest's")
    return entries


@dataclass(frozen=True)
class Savepoint:
    """An opened, manifest-validated savepoint directory."""

    path: Path
    manifest: SavepointManifest

    @classmethod
    def open(cls, path: Path) -> Savepoint:
        """Open and validate the manifest (data files are checked when read)."""
        return cls(Path(path), read_manifest(Path(path)))

    def entries(
        self, groups: Iterable[int] | None = None, keys: Keys | None = None
    ) -> list[tuple[bytes, list[Element]]]:
        """Every entry of the given key groups (default all), each file fully verified first.

        With ``keys``, every row's context key is recomputed and must equal its entry's.
        """
        wanted = None if groups is None else set(groups)
        if keys is None:
            keys = Keys(pk=self.manifest.pk, upsert_key=self.manifest.upsert_key)
        result: list[tuple[bytes, list[Element]]] = []
        for data in self.manifest.files:
            if wanted is None or data.key_group in wanted:
                result.extend(_read_data_file(self.path, data, self.manifest, keys))
        return result

    def verify(self) -> None:
        """Read and verify every data file. SavepointError on the first problem."""
        self.entries()

    def load_into(
        self,
        materializer: Materializer,
        keys: Keys,
        *,
        ttl: TtlSettings | None = None,
        parallelism: int = 1,
        index: int = 0,
    ) -> int:
        """Restore the key groups of instance ``index`` of ``parallelism`` into ``materializer``.

        Refuses (SavepointMismatch) other keys, another equalizer or (when given) other TTL
        settings; every file read is verified before anything is imported. Returns the number
        of context keys imported.
        """
        self.manifest.check_compatible(keys, ttl, self.path)
        groups = key_group_range(index, parallelism, self.manifest.max_parallelism)
        entries = self.entries(groups, keys)
        import_state(materializer, entries, self.manifest.now)
        return len(entries)


def load_savepoint(
    path: Path,
    into: Materializer,
    *,
    keys: Keys,
    ttl: TtlSettings | None = None,
    parallelism: int = 1,
    index: int = 0,
) -> SavepointManifest:
    """Open, verify and restore the savepoint at ``path`` into ``into`` (see ``Savepoint.load_into``)."""
    savepoint = Savepoint.open(path)
    savepoint.load_into(into, keys, ttl=ttl, parallelism=parallelism, index=index)
    return savepoint.manifest


def remove_savepoint(path: Path) -> None:
    """Delete a savepoint directory (only if it has a savepoint manifest)."""
    read_manifest(path)
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(path)
