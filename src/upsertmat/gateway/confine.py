"""Keeping a submitted job inside the gateway's data root, and away from the gateway's own files.

A job submitted over the API reads its source and writes its checkpoint and sink only under the
data root: a path with a ``..`` component is refused as written, and every path is resolved
(symbolic links followed, as far as they exist) and must stay under the resolved root. A
PostgreSQL sink is refused (it is not under the root).

Inside the root, the gateway's **own files** are refused as a source, a checkpoint or a sink
(:class:`OutsideRoot`, 403): the registry ``gateway.db`` (and its ``-wal``/``-shm``/``-journal``),
``gateway.lock``, ``gateway.json``, the Spark logs under ``logs/``, and ``jobs/`` — every job's
directory (checkpoint, internal ``result.db``) except the submitted job's own one, which only its
checkpoint and sink may use. A path *containing* one of them is refused too (a source or a
checkpoint that is the root itself), and a sink file that is the same file as a reserved one or
another job's sink through a hard link (same device and inode). Another job's source, checkpoint
or sink (:class:`Taken`, 409) may not be used either: a source or checkpoint overlapping another
job's checkpoint or sink, a sink writing another job's table. O(jobs x path length).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path, PurePath

from ..jobs.model import JobSpec

REGISTRY_FILES = ("gateway.db", "gateway.db-wal", "gateway.db-shm", "gateway.db-journal")
RESERVED_FILES = (*REGISTRY_FILES, "gateway.lock", "gateway.json", ".gateway.json.partial")
RESERVED_DIRS = ("jobs", "logs", "deleted")


class OutsideRoot(ValueError):
    """A path (or database) of a submitted job outside the data root, or one of the gateway's own."""


class Taken(ValueError):
    """A path of a submitted job that another job of the registry uses."""


def has_parent_step(text: str) -> bool:
    """True if a path as written has a ``..`` component."""
    return ".." in PurePath(text).parts


def confine(path: Path, root: Path, what: str) -> Path:
    """``path`` resolved; OutsideRoot unless it is the root or below it (symlinks followed)."""
    if has_parent_step(str(path)):
        raise OutsideRoot(f"{what} {path} has a '..' component: paths must stay under the data root")
    resolved = path.resolve()
    if resolved != root and root not in resolved.parents:
        raise OutsideRoot(f"{what} {path} is outside the gateway's data root {root}")
    return resolved


def overlaps(first: Path, second: Path) -> bool:
    """True if one path is the other or lies under it (resolved paths)."""
    return first == second or first in second.parents or second in first.parents


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_dev, stat.st_ino)


def job_paths(job: JobSpec, root: Path) -> tuple[Path, Path, Path | None]:
    """(source, checkpoint, the sink's SQLite file or lakehouse table directory) of ``job``,
    resolved and confined."""
    source = confine(job.source.path, root, "source.path")
    checkpoint = confine(job.checkpoint, root, "checkpoint")
    local = job.sink.local_path()
    if local is None:  # a database server or a named catalog: outside what the gateway can confine
        raise OutsideRoot(
            "sink.url: the gateway writes only under its data root; use a SQLite file or a table "
            "directory there, or sink: {internal: true}"
        )
    return source, checkpoint, confine(local, root, "sink.url")


def confine_job(job: JobSpec, root: Path, own_dir: Path | None = None) -> None:
    """OutsideRoot unless the job's source, checkpoint and SQLite sink are under ``root``, are
    none of the gateway's own files and its sink is not a PostgreSQL database. ``own_dir``: the
    job's directory under ``jobs/``, which its checkpoint and sink may use."""
    root = root.resolve()
    source, checkpoint, sink = job_paths(job, root)
    own = None if own_dir is None else own_dir.resolve()
    reserved_files = [root / name for name in RESERVED_FILES]
    reserved_dirs = [root / name for name in RESERVED_DIRS]
    outputs: list[tuple[str, Path]] = [("checkpoint", checkpoint)]
    if sink is not None:
        outputs.append(("sink.url", sink))
    for what, path in [("source.path", source), *outputs]:
        if path == root:
            raise OutsideRoot(f"{what} is the data root itself, which holds the gateway's registry")
        for reserved in reserved_files:
            if overlaps(path, reserved):
                raise OutsideRoot(f"{what} {path} is the gateway's own file {reserved.name}")
        for directory in reserved_dirs:
            if not overlaps(path, directory):
                continue
            if what != "source.path" and own is not None and (path == own or own in path.parents):
                continue  # the job's own directory: its checkpoint and internal result
            raise OutsideRoot(f"{what} {path} is inside the gateway's own {directory.name}/ directory")
    if sink is not None:
        found = _identity(sink)
        if found is not None and found in {_identity(reserved) for reserved in reserved_files}:
            raise OutsideRoot(f"sink.url {sink} is the gateway's own registry (a link to it)")


def check_taken(job: JobSpec, root: Path, others: Iterable[tuple[str, JobSpec]]) -> None:
    """Taken if ``job`` uses a path of one of ``others`` (``(job id, job)``, already confined):
    its source or checkpoint overlapping another's checkpoint or sink, its checkpoint another's
    source, its sink another's table (the same file, by path or by link; a Delta table is its
    directory, whatever name the job gives it)."""
    root = root.resolve()
    source, checkpoint, sink = job_paths(job, root)
    for other_id, other in others:
        try:
            other_source, other_checkpoint, other_sink = job_paths(other, root)
        except OutsideRoot:
            continue
        other_outputs = [other_checkpoint] + ([] if other_sink is None else [other_sink])
        for what, path in [("source.path", source), ("checkpoint", checkpoint)]:
            for used in other_outputs:
                if overlaps(path, used):
                    raise Taken(f"{what} {path} overlaps job {other_id}'s checkpoint or sink {used}")
        if overlaps(checkpoint, other_source):
            raise Taken(f"checkpoint {checkpoint} overlaps job {other_id}'s source {other_source}")
        if sink is not None and other_sink is not None:
            same = sink == other_sink or (
                _identity(sink) is not None and _identity(sink) == _identity(other_sink)
            )
            if same and job.sink.kind.location_is_table:  # one table there, whatever its name
                raise Taken(f"job {other_id} writes the {job.sink.kind.name} table {sink}")
            if same and job.sink.table == other.sink.table:
                raise Taken(f"job {other_id} writes table {job.sink.table} of {sink}")
            if overlaps(sink, other_checkpoint) or overlaps(sink, other_source):
                raise Taken(f"sink.url {sink} is inside job {other_id}'s checkpoint or source")
