"""The state directory of ``upsertmat replay --state-dir DIR``: lock, manifest, heap snapshot.

Layout of ``DIR``::

    lock                      flock'ed for the whole run (holds the owner's pid, for people)
    manifest.json             what the state is and how far the stream got (written last)
    snapshot-NNNNNNNN.msgpack heap state: per-key histories (only for heap backends)
    <backend>/...             a byte backend's own files (Settings.state_dir is DIR)
    dead-letter.jsonl         default dead-letter file of --on-error skip

Writes are atomic and ordered so that a crash at any point leaves the previous consistent
state: the snapshot goes to a new generation's file (temp file, fsync, rename, fsync of the
directory), then the manifest naming it and its SHA-256 replaces the old manifest the same
way, then older snapshot files are removed. A manifest or snapshot that is unreadable,
truncated, of an unknown version or whose checksum differs is refused with a
:class:`~upsertmat.errors.StateDirError` naming the file: a damaged directory never turns
silently into an empty state.

The snapshot is msgpack (never pickle), streamed: a header map, one ``[context key, rows,
stamps]`` array per context key in the implementation's order (``stamps[i]`` is the TTL
stamp of ``rows[i]``), and a trailer ``{"end": count}``.
JSON values map to msgpack types one to one (so ``1``, ``1.0``, ``true`` stay apart and
object key order is kept). Since version 3 values are encoded exactly as the byte backends
store them (:mod:`upsertmat.impls.state.codec`: integers beyond 64 bits as extension type 1,
two's complement), so msgpack extension type 1 has one meaning in every file upsertmat
writes; version 2 snapshots (extension type 1 as decimal text) are still read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any

import msgpack

from ...spec import Element, Keys, Row, TtlSettings
from ..documents import Fields, RunRecord, check_header, is_integer, runs_of, ttl_settings_of
from ..lifecycle.keygroups import Partition
from ..settings import MAX_TIME_MS
from ..state import codec, files
from ..state.errors import CorruptStateError, StateError, StorageError, os_failure
from ..state.locking import DirectoryLock
from .errors import StateDirError, StateDirIOError, StateDirWriteError

MANIFEST_NAME = "manifest.json"
LOCK_NAME = "lock"
DEAD_LETTER_NAME = "dead-letter.jsonl"
MANIFEST_FORMAT = "upsertmat-replay-state"
MANIFEST_VERSION = 1
SNAPSHOT_FORMAT = "upsertmat-heap-histories"
SNAPSHOT_VERSION = 3
_DECIMAL_SNAPSHOT_VERSION = 2  # extension type 1 held an integer as decimal ASCII
_SNAPSHOT_PREFIX = "snapshot-"
_SNAPSHOT_SUFFIX = ".msgpack"
_IGNORABLE = frozenset({LOCK_NAME, DEAD_LETTER_NAME})
_BACKEND_DIRECTORIES = frozenset({"rocksdb", "lmdb"})


@dataclass(frozen=True)
class Manifest:
    """What ``manifest.json`` records.

    ``lines``: input lines consumed so far over all runs (blank and skipped lines included),
    i.e. the ``in`` index the next run's first line gets. ``now``: the latest ``time`` seen.
    ``retract_misses``: rule-7 retractions so far. ``generation`` numbers the saves;
    ``snapshot`` names the heap snapshot file (None for byte backends, which keep their
    state in ``DIR`` themselves) and ``snapshot_sha256`` its checksum.

    Crash recovery (docs/operations.md): ``in_progress`` is true while a run is going on;
    ``run_start`` is the stream index of that run's first line, so a run restarted with the
    same input after a kill skips ``lines - run_start`` lines of it; ``output_bytes`` is the
    length of that run's ``-o FILE`` at the checkpoint (None for stdout), to which a resumed
    run truncates it. Byte backends refine ``lines``, ``now``, the misses and the output
    length per input in a record committed atomically with the state (see ``replay``).
    """

    pk: tuple[int, ...]
    upsert_key: tuple[int, ...]
    strategy: str
    backend: str
    equalizer: str
    equalizer_fingerprint: str
    arity: int | None = None
    lines: int = 0
    now: int = 0
    retract_misses: int = 0
    generation: int = 0
    snapshot: str | None = None
    snapshot_sha256: str | None = None
    in_progress: bool = False
    run_start: int = 0
    output_bytes: int | None = None
    ttl: dict[str, Any] | None = None
    """The TTL settings of the state (:func:`ttl_record`); None in manifests written before
    TTL was recorded (then the run's settings are trusted)."""
    run_id: int = 0
    """Runs started on this directory so far: the number of the current (or last) run."""
    input: str | None = None
    """The current (or last) run's input: an absolute path, or ``-`` for stdin."""
    input_bytes: int = 0
    """Bytes of the current run's input consumed at this save (whole lines)."""
    input_sha256: str | None = None
    """SHA-256 of those bytes: a resumed run must begin with exactly them."""
    dead_letter_bytes: int | None = None
    """Length of the dead-letter file at this save (None: it did not exist); a resume truncates it."""
    misses_bytes: int | None = None
    """Length of the run's ``--misses`` file at this save (None: none); a resume truncates it."""
    state_id: str | None = None
    """A random name of this state's data, also committed inside byte backends' databases, so a
    database and a manifest of different states are never mixed."""
    conflict: str | None = None
    """``table.exec.sink.conflict-strategy`` of the state (None in manifests written before it
    was recorded: DEDUPLICATE, the only behaviour then)."""
    runs: tuple[RunRecord, ...] = ()
    """Every completed run, oldest first: what makes a rerun recognisable (docs/operations.md)."""
    partition: Partition | None = None
    """The key groups the state owns, when it was restored as one instance of several (None:
    all of them): changes of other keys are not applied (docs/operations.md, "Rescaling")."""

    def to_json(self) -> dict[str, Any]:
        """The manifest as a JSON object (with the format name and version)."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        data["ttl"] = None if self.ttl is None else dict(self.ttl)
        data["partition"] = None if self.partition is None else self.partition.to_json()
        data["pk"], data["upsert_key"] = list(self.pk), list(self.upsert_key)
        data["runs"] = [run.to_json() for run in self.runs]
        return {"format": MANIFEST_FORMAT, "version": MANIFEST_VERSION, **data}

    @classmethod
    def from_json(cls, data: object, path: Path) -> Manifest:
        """Validate and build; StateDirError naming ``path`` on any deviation."""

        def bad(what: str) -> StateDirError:
            return StateDirError(f"damaged manifest {path}: {what}; refusing to start from it")

        document = check_header(
            data,
            MANIFEST_FORMAT,
            MANIFEST_VERSION,
            lambda: bad(f"not an upsertmat state manifest (expected format {MANIFEST_FORMAT!r})"),
            lambda found: StateDirError(
                f"manifest {path} has format version {found!r}; this upsertmat reads version "
                f"{MANIFEST_VERSION} only"
            ),
        )
        read = Fields(document, bad)
        snapshot = read.text("snapshot", nullable=True)
        if snapshot is not None and (os.sep in snapshot or not snapshot.startswith(_SNAPSHOT_PREFIX)):
            raise bad(f"'snapshot' must name a {_SNAPSHOT_PREFIX}*{_SNAPSHOT_SUFFIX} file, got {snapshot!r}")
        snapshot_sha256 = read.text("snapshot_sha256", nullable=True)
        if (snapshot is None) != (snapshot_sha256 is None):
            raise bad("'snapshot' and 'snapshot_sha256' must be both set or both null")
        ttl = document.get("ttl")
        if ttl is not None:
            try:
                ttl_from_record(ttl)
            except ValueError as error:
                raise bad(str(error)) from None
        runs = runs_of(read.sequence("runs", default=[]), bad)
        partition = None
        if document.get("partition") is not None:
            try:
                partition = Partition.from_json(document["partition"])
            except ValueError as error:
                raise bad(str(error)) from None
        manifest = cls(
            pk=read.columns("pk"),
            upsert_key=read.columns("upsert_key"),
            strategy=read.text("strategy"),
            backend=read.text("backend"),
            equalizer=read.text("equalizer"),
            equalizer_fingerprint=read.text("equalizer_fingerprint"),
            arity=read.natural("arity", minimum=1, nullable=True),
            lines=read.natural("lines"),
            now=read.natural("now", maximum=MAX_TIME_MS),
            retract_misses=read.natural("retract_misses"),
            generation=read.natural("generation"),
            snapshot=snapshot,
            snapshot_sha256=snapshot_sha256,
            in_progress=read.flag("in_progress"),
            # Absent in manifests written before recovery, or before reruns were recognised
            # (format 1 all the same).
            run_start=read.natural("run_start", default=0),
            output_bytes=read.natural("output_bytes", nullable=True),
            ttl=ttl,
            run_id=read.natural("run_id", default=0),
            input=read.text("input", nullable=True),
            input_bytes=read.natural("input_bytes", default=0),
            input_sha256=read.text("input_sha256", nullable=True),
            dead_letter_bytes=read.natural("dead_letter_bytes", nullable=True),
            misses_bytes=read.natural("misses_bytes", nullable=True),
            state_id=read.text("state_id", nullable=True),
            conflict=read.text("conflict", nullable=True),
            runs=runs,
            partition=partition,
        )
        if manifest.run_start > manifest.lines:
            raise bad(
                f"'run_start' ({manifest.run_start}) is beyond 'lines' ({manifest.lines}): no run starts "
                "after the position"
            )
        return manifest


def ttl_record(ttl: TtlSettings) -> dict[str, Any]:
    """The JSON record of TTL settings kept in the manifest."""
    return {"ttl_ms": ttl.ttl_ms, "time_domain": ttl.time_domain.value, "update_type": ttl.update_type.value}


def ttl_from_record(record: object) -> TtlSettings:
    """The TTL settings of a manifest record; ValueError when it is not one."""
    return ttl_settings_of(record, "'ttl' must be {ttl_ms, time_domain, update_type} or null")


def ttl_text(ttl: TtlSettings) -> str:
    """``off`` or ``10 ms (processing_time, on_create_and_write)``: for messages."""
    if not ttl.enabled:
        return "off"
    return f"{ttl.ttl_ms} ms ({ttl.time_domain.value}, {ttl.update_type.value})"


def _decimal_ext_hook(code: int, data: bytes) -> int:
    """Version 2 snapshots: extension type 1 is an integer as decimal ASCII."""
    if code != codec.BIG_INT:
        raise ValueError(f"unknown msgpack extension type {code}")
    return int(data.decode("ascii"))


MANIFEST_MAX_BYTES = 64 << 20
"""A manifest is a few KiB (plus ~200 bytes per completed run); anything larger is not one."""


def io_failure(error: OSError, what: str) -> StateDirError:
    """An OSError met while using a state directory (``what``: what was being done, naming
    the path): a full disk or a device error is a :class:`StateDirIOError` (exit 4: free space
    or fix the device and run again), anything else a refusal (:class:`StateDirError`)."""
    failure = os_failure(error, what)
    if isinstance(failure, StorageError):
        return StateDirIOError(f"{failure}; free space (or fix the device) and run the same command again")
    return StateDirError(str(failure))


def open_regular(path: Path, what: str, limit: int | None = None) -> IO[bytes]:
    """:func:`upsertmat.impls.state.files.open_regular`, its refusals and OS errors as StateDirErrors
    naming the file (FileNotFoundError propagates)."""
    try:
        return files.open_regular(path, what, limit)
    except FileNotFoundError:
        raise
    except CorruptStateError as error:
        raise StateDirError(str(error)) from None
    except OSError as error:
        raise io_failure(error, f"cannot read {what} {path}") from None


class StateDir:
    """A locked state directory. Use as a context manager: ``with StateDir(path) as sd: ...``.

    Opening creates the directory if needed and takes an exclusive, non-blocking ``flock``
    on ``DIR/lock``; a second process gets a StateDirError at once. Closing releases it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock: DirectoryLock | None = None

    @property
    def manifest_path(self) -> Path:
        """``DIR/manifest.json``."""
        return self.path / MANIFEST_NAME

    def __enter__(self) -> StateDir:
        self.open()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def open(self) -> None:
        """Create the directory if missing and lock it. StateDirError if that fails
        (StateDirIOError for a full disk or a device error)."""
        try:
            self._lock = DirectoryLock(self.path, LOCK_NAME)
        except StorageError as error:
            raise StateDirIOError(
                f"{error}; free space (or fix the device) and run the same command again"
            ) from None
        except StateError as error:
            raise StateDirError(str(error)) from None

    def close(self, *, remove_lock: bool = False) -> None:
        """Release the lock (idempotent). ``remove_lock``: remove the lock file too, while it
        is still held (a refused restore leaves nothing it created)."""
        if self._lock is not None:
            if remove_lock:
                with contextlib.suppress(OSError):
                    os.unlink(self.path / LOCK_NAME)
            self._lock.release()
            self._lock = None

    def load_manifest(self) -> Manifest | None:
        """The manifest, or None for a fresh directory.

        A directory without a manifest must hold nothing but the lock and dead-letter files;
        otherwise it is not (or no longer) a usable state directory and is refused.
        """
        self._remove_temporary_files()
        try:
            with open_regular(self.manifest_path, "manifest", MANIFEST_MAX_BYTES) as stream:
                text = stream.read().decode("utf-8")
        except FileNotFoundError:
            # A byte backend's directory may exist without a manifest: a first run is killed
            # after creating its database and before saving its first manifest. The caller
            # checks that such a database holds no committed position (then it is empty).
            others = sorted(set(self._names()) - _IGNORABLE - _BACKEND_DIRECTORIES)
            if others:
                raise StateDirError(
                    f"{self.path} has no {MANIFEST_NAME} but is not empty ({', '.join(others)}); "
                    "it is not an upsertmat state directory, or its manifest was lost"
                ) from None
            return None
        except OSError as error:
            raise io_failure(error, f"cannot read manifest {self.manifest_path}") from None
        except UnicodeDecodeError as error:
            raise StateDirError(
                f"damaged manifest {self.manifest_path}: not UTF-8 ({error}); refusing to start from it"
            ) from None
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as error:
            reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
            raise StateDirError(
                f"damaged manifest {self.manifest_path}: not valid JSON ({reason}); refusing to start from it"
            ) from None
        return Manifest.from_json(data, self.manifest_path)

    def _names(self) -> list[str]:
        """The names in the directory."""
        try:
            return os.listdir(self.path)
        except OSError as error:
            raise io_failure(error, f"cannot read the state directory {self.path}") from None

    def _remove_temporary_files(self) -> None:
        """Remove what a process killed between writing a temporary file and its rename left.

        Such a file is never named by a manifest, so it holds nothing anyone needs."""
        for name in self._names():
            if name.startswith(".") and name.endswith(".tmp"):
                try:
                    (self.path / name).unlink()
                except FileNotFoundError:
                    pass
                except OSError as error:
                    raise io_failure(error, f"cannot remove {self.path / name}") from None

    def load_snapshot(self, manifest: Manifest, keys: Keys) -> list[tuple[bytes, list[Element]]]:
        """The histories of the manifest's snapshot (empty if it names none), fully verified.

        Checks the SHA-256, the header (format, version, keys, equalizer), every entry's
        shape and context key (recomputed from its rows), arity, and the trailer's count.
        O(size of the snapshot).
        """
        if manifest.snapshot is None:
            return []
        path = self.path / manifest.snapshot
        try:
            with open_regular(path, "snapshot") as stream:
                digest = _sha256_of(stream)
        except FileNotFoundError:
            raise StateDirError(
                f"cannot read snapshot {path}: it is missing, but {self.manifest_path} names it; "
                "refusing to start from empty state"
            ) from None
        except OSError as error:
            raise io_failure(error, f"cannot read snapshot {path}") from None
        if digest != manifest.snapshot_sha256:
            raise StateDirError(
                f"damaged snapshot {path}: its SHA-256 does not match {self.manifest_path}; "
                "refusing to start from it"
            )
        try:
            with open_regular(path, "snapshot") as stream:
                return _read_snapshot(stream, manifest, keys)
        except StateDirError:
            raise
        except OSError as error:
            raise io_failure(error, f"cannot read snapshot {path}") from None
        except Exception as error:  # any decoding failure means a damaged file
            raise StateDirError(f"damaged snapshot {path}: {error}; refusing to start from it") from None

    def save(
        self,
        manifest: Manifest,
        histories: Iterable[tuple[bytes, list[Element]]] | None,
        *,
        keep_snapshot: bool = False,
    ) -> Manifest:
        """:meth:`_save`, with a failed write (a full disk) as a StateDirWriteError (exit 4).

        A failed save leaves the previous manifest (and the snapshot it names) in place.
        """
        try:
            return self._save(manifest, histories, keep_snapshot=keep_snapshot)
        except OSError as error:
            raise StateDirWriteError(
                f"cannot write the state directory {self.path}: {error.strerror or error}; it is left at "
                "its last commit: free space and run the same command again to go on"
            ) from None

    def _save(
        self,
        manifest: Manifest,
        histories: Iterable[tuple[bytes, list[Element]]] | None,
        *,
        keep_snapshot: bool = False,
    ) -> Manifest:
        """Persist ``manifest`` (and, for heap state, ``histories`` as a new snapshot).

        ``histories``: per context key its elements ``(row, stamp)`` in insertion order.
        With ``keep_snapshot`` and no histories, the manifest keeps naming its snapshot.
        Returns the manifest as written (next generation, snapshot name and checksum).
        Older snapshot files are removed once the new manifest is in place.
        """
        generation = manifest.generation + 1
        snapshot = digest = None
        if keep_snapshot and histories is None:
            snapshot, digest = manifest.snapshot, manifest.snapshot_sha256
        if histories is not None:
            snapshot = f"{_SNAPSHOT_PREFIX}{generation:08d}{_SNAPSHOT_SUFFIX}"
            hasher = hashlib.sha256()
            files.write_atomically(
                self.path / snapshot, lambda stream: _write_snapshot(stream, hasher, manifest, histories)
            )
            digest = hasher.hexdigest()
        saved = replace(manifest, generation=generation, snapshot=snapshot, snapshot_sha256=digest)
        text = json.dumps(saved.to_json(), indent=2) + "\n"
        files.write_atomically(self.manifest_path, lambda stream: _write_bytes(stream, text.encode("utf-8")))
        # The new manifest is in place: an older snapshot that cannot be removed now is named by
        # no manifest, and the next save removes it.
        with contextlib.suppress(OSError):
            for name in os.listdir(self.path):
                if name.startswith(_SNAPSHOT_PREFIX) and name.endswith(_SNAPSHOT_SUFFIX) and name != snapshot:
                    (self.path / name).unlink()
        return saved

    def remove_state(self) -> None:
        """Remove the manifest, every heap snapshot and temporary file: what a fresh
        directory's session wrote before it failed. OSError propagates."""
        for name in os.listdir(self.path):
            snapshot = name.startswith(_SNAPSHOT_PREFIX) and name.endswith(_SNAPSHOT_SUFFIX)
            if snapshot or name == MANIFEST_NAME or (name.startswith(".") and name.endswith(".tmp")):
                (self.path / name).unlink(missing_ok=True)


def _write_bytes(stream: IO[bytes], data: bytes) -> None:
    stream.write(data)


def _sha256_of(stream: IO[bytes]) -> str:
    hasher = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):
        hasher.update(block)
    return hasher.hexdigest()


def _header(manifest: Manifest) -> dict[str, Any]:
    return {
        "format": SNAPSHOT_FORMAT,
        "version": SNAPSHOT_VERSION,
        "pk": list(manifest.pk),
        "upsert_key": list(manifest.upsert_key),
        "equalizer": manifest.equalizer,
        "equalizer_fingerprint": manifest.equalizer_fingerprint,
    }


def _write_snapshot(
    stream: IO[bytes],
    hasher: Any,
    manifest: Manifest,
    histories: Iterable[tuple[bytes, list[Element]]],
) -> None:
    packer = msgpack.Packer(default=codec.pack_default, use_bin_type=True)

    def emit(value: object) -> None:
        data = packer.pack(value)
        hasher.update(data)
        stream.write(data)

    emit(_header(manifest))
    count = 0
    for context, elements in histories:
        emit([context, [list(row) for row, _ in elements], [stamp for _, stamp in elements]])
        count += 1
    emit({"end": count})


def _read_snapshot(stream: IO[bytes], manifest: Manifest, keys: Keys) -> list[tuple[bytes, list[Element]]]:
    version: int | None = None

    def ext_hook(code: int, data: bytes) -> int:  # the header (no extensions) comes first
        if version == _DECIMAL_SNAPSHOT_VERSION:
            return _decimal_ext_hook(code, data)
        value: int = codec.ext_hook(code, data)
        return value

    unpacker = msgpack.Unpacker(
        stream, raw=False, strict_map_key=True, ext_hook=ext_hook, max_buffer_size=1 << 31
    )
    entries: Iterator[Any] = iter(unpacker)
    header = next(entries, None)
    if not isinstance(header, dict) or header.get("format") != SNAPSHOT_FORMAT:
        raise ValueError(f"not an upsertmat heap snapshot (expected format {SNAPSHOT_FORMAT!r})")
    version = header.get("version")
    if version not in (_DECIMAL_SNAPSHOT_VERSION, SNAPSHOT_VERSION):
        raise ValueError(
            f"format version {version!r}; this upsertmat reads versions {_DECIMAL_SNAPSHOT_VERSION} "
            f"and {SNAPSHOT_VERSION}"
        )
    if header != {**_header(manifest), "version": version}:
        raise ValueError("its header (keys or equalizer) disagrees with the manifest")
    histories: list[tuple[bytes, list[Element]]] = []
    for entry in entries:
        if isinstance(entry, dict):
            if entry != {"end": len(histories)} or next(entries, None) is not None:
                raise ValueError("bad trailer")
            return histories
        histories.append(_history(entry, manifest, keys))
    raise ValueError("truncated (no trailer)")


def _history(entry: object, manifest: Manifest, keys: Keys) -> tuple[bytes, list[Element]]:
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], bytes)):
        raise ValueError("an entry is not [context key, rows, stamps]")
    context, rows, stamps = entry
    if not isinstance(rows, list) or not rows or not all(isinstance(row, list) for row in rows):
        raise ValueError("an entry's rows are not a non-empty list of rows")
    if not (
        isinstance(stamps, list)
        and len(stamps) == len(rows)
        and all(is_integer(stamp) and abs(stamp) <= MAX_TIME_MS for stamp in stamps)
    ):
        raise ValueError(f"an entry's stamps are not one integer of magnitude at most {MAX_TIME_MS} per row")
    history: list[Row] = []
    for row in rows:
        if not all(is_json_value(value) for value in row):
            raise ValueError("a row holds a value JSON cannot carry (bytes, an extension type, NaN, ...)")
        if manifest.arity is not None and len(row) != manifest.arity:
            raise ValueError(f"a row has {len(row)} columns, the manifest says {manifest.arity}")
        if keys.context_key(row) != context:
            raise ValueError("a row is stored under a context key that is not its own")
        history.append(tuple(row))
    return context, list(zip(history, stamps, strict=True))


def is_json_value(value: object, depth: int = 0) -> bool:
    """True for what a JSON Lines input can hold: null, booleans, integers, finite floats,
    strings, and arrays and objects (string keys) of those, nested at most 1,000 deep."""
    if value is None or isinstance(value, bool | int | str):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if depth >= 1000:
        return False
    if isinstance(value, list):
        return all(is_json_value(item, depth + 1) for item in value)
    if isinstance(value, dict):
        return all(isinstance(key, str) and is_json_value(item, depth + 1) for key, item in value.items())
    return False
