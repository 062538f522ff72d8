"""The table of sink kinds, chosen by URL scheme, and the operations every other module uses.

:data:`KINDS` lists one :class:`~.kind.SinkKind` per sink; their schemes do not overlap (the
SQLite kind also takes plain file paths). Every module that meets a sink URL asks this table
(:func:`kind_of`, or the functions below, which dispatch through it); none switches on a kind.
Adding a sink is one module with its :class:`~.base.BatchSink` and its kind, and one line here
(docs/architecture.md, *Adding things*). O(kinds) per lookup.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import BatchSink, Column, SinkError
from .delta import DeltaKind
from .iceberg import IcebergKind
from .kind import SinkKind, SinkUrlError
from .paimon import PaimonKind
from .postgresql import PostgresKind
from .reading import TableChange, TableSnapshot
from .sqlite import SqliteKind

KINDS: tuple[SinkKind, ...] = (SqliteKind(), PostgresKind(), DeltaKind(), IcebergKind(), PaimonKind())
"""Every sink kind (the order of the URL forms in messages)."""


def kind_of(url: str) -> SinkKind:
    """The kind whose scheme ``url`` has; SinkUrlError naming every form for any other URL
    (``mysql://…``). The URL may still be malformed for its kind (:func:`check_url`)."""
    for kind in KINDS:
        if kind.claims(url):
            return kind
    forms = ", ".join(form for kind in KINDS for form in kind.forms)
    raise SinkUrlError(f"unsupported database URL {url!r} ({forms})")


def kind_named(name: str) -> SinkKind:
    """The kind called ``name`` (``sqlite``, ``delta``, ...); SinkUrlError naming the kinds."""
    for kind in KINDS:
        if kind.name == name:
            return kind
    raise SinkUrlError(f"no sink kind {name!r}; the kinds are {', '.join(kind.name for kind in KINDS)}")


def check_url(url: str) -> None:
    """SinkUrlError unless ``url`` names a sink upsertmat can write. O(len(url))."""
    kind_of(url).check(url)


def resolve_url(url: str, base: Path) -> str:
    """``url`` with a relative SQLite file, Delta table or Iceberg warehouse made absolute
    against ``base``; server URLs and named catalogs unchanged. SinkUrlError if malformed."""
    return kind_of(url).resolve(url, base)


def open_sink(
    url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
) -> BatchSink:
    """The sink for ``url`` (:meth:`SinkKind.open <.kind.SinkKind.open>`); SinkError for a URL
    no kind takes."""
    try:
        kind = kind_of(url)
    except SinkUrlError as error:
        raise SinkError(str(error)) from None
    return kind.open(url, table, columns, pk, changelog=changelog)


def _kind(url: str) -> SinkKind:
    try:
        return kind_of(url)
    except SinkUrlError as error:
        raise SinkError(str(error)) from None


def read_snapshot(url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
    """The table as the last committed batch left it (:meth:`SinkKind.snapshot
    <.kind.SinkKind.snapshot>`); SinkError if unreadable."""
    return _kind(url).snapshot(url, table, pk, limit)


def snapshot_header(url: str, table: str, pk: Sequence[str]) -> TableSnapshot | None:
    """:func:`read_snapshot` without rows (the batch id, the row count, the changelog position),
    or None when the sink cannot be read: what a status or a metric shows."""
    try:
        return read_snapshot(url, table, pk, 0)
    except SinkError:
        return None


def read_changes(url: str, table: str, after: int, limit: int, upto: int | None = None) -> list[TableChange]:
    """The committed changes at positions ``after < pos [<= upto]``, in order, at most ``limit``."""
    return _kind(url).changes(url, table, after, limit, upto)


def last_batch(url: str, table: str) -> int | None:
    """The greatest batch id committed for ``table`` (None: none yet, or unreadable)."""
    try:
        kind = kind_of(url)
    except SinkUrlError:
        return None
    return kind.last_batch(url, table)


def last_position(url: str, table: str) -> int:
    """The changelog position of the last committed change of ``table`` (0: none)."""
    return _kind(url).last_position(url, table)


def drop_results(url: str, table: str) -> None:
    """Remove ``table`` and everything recorded for it (:meth:`SinkKind.drop <.kind.SinkKind.drop>`)."""
    _kind(url).drop(url, table)


def maintain(url: str, table: str, *, retention_hours: float | None = None) -> dict[str, Any]:
    """The sink kind's documented maintenance of ``table`` (:meth:`SinkKind.maintain
    <.kind.SinkKind.maintain>`)."""
    return _kind(url).maintain(url, table, retention_hours=retention_hours)
