"""Keeping a submitted job inside the gateway's data root.

A job submitted over the API reads its source and writes its checkpoint and sink only under the
data root: a path with a ``..`` component is refused as written, and every path is resolved
(symbolic links followed, as far as they exist) and must stay under the resolved root. A
PostgreSQL sink is refused (it is not under the root). O(path length).
"""

from __future__ import annotations

from pathlib import Path, PurePath

from ..jobs.model import JobSpec


class OutsideRoot(ValueError):
    """A path (or database) of a submitted job that is not under the data root."""


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


def confine_job(job: JobSpec, root: Path) -> None:
    """OutsideRoot unless the job's source, checkpoint and SQLite sink are under ``root``
    (resolved) and its sink is not a PostgreSQL database."""
    root = root.resolve()
    confine(job.source.path, root, "source.path")
    confine(job.checkpoint, root, "checkpoint")
    if job.sink.is_postgresql:
        raise OutsideRoot(
            "sink.url: the gateway writes only under its data root; use a SQLite file there or "
            "sink: {internal: true}"
        )
    local = job.sink.local_path()
    if local is None:  # a named Iceberg catalog: outside what the gateway can confine
        raise OutsideRoot("sink.url: the gateway writes only under its data root; name a directory there")
    confine(local, root, "sink.url")
