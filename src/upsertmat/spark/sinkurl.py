"""Sink URLs, one convention everywhere: SQLAlchemy's.

``sqlite:///rel/path.db`` (three slashes) is a path relative to a base directory (the working
directory for a URL given on the command line or to :class:`~upsertmat.spark.PipelineConfig`);
``sqlite:////abs/path.db`` (four slashes) is absolute; a URL without a scheme is a plain file
path, relative or absolute as written. ``postgresql://…`` / ``postgres://…`` name a PostgreSQL
database. Anything else (``sqlite://`` without a path, ``mysql://``) is refused. No pyspark
import: loading jobs uses this without Spark. O(len(url)).
"""

from __future__ import annotations

from pathlib import Path

SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")


class SinkUrlError(ValueError):
    """A sink URL that names no database upsertmat can write."""


def is_postgresql(url: str) -> bool:
    """True for ``postgresql://`` and ``postgres://`` URLs."""
    return url.startswith(POSTGRES_PREFIXES)


def sqlite_path(url: str, base: Path | None = None) -> Path:
    """The SQLite file a non-PostgreSQL ``url`` names; a relative one is joined to ``base``
    (default: left relative, i.e. to the working directory). SinkUrlError if it names none."""
    if is_postgresql(url):
        raise SinkUrlError(f"not a SQLite sink: {url}")
    if url.startswith("sqlite:"):
        if not url.startswith(SQLITE_PREFIX) or len(url) == len(SQLITE_PREFIX):
            raise SinkUrlError(
                f"unsupported SQLite URL {url!r}: write sqlite:///relative/path.db or "
                "sqlite:////absolute/path.db (SQLAlchemy's convention), or a plain file path"
            )
        path = Path(url[len(SQLITE_PREFIX) :])
    elif "://" in url:
        raise SinkUrlError(f"unsupported database URL {url!r} (a SQLite path, sqlite:///…, postgresql://…)")
    elif not url.strip():
        raise SinkUrlError("the sink URL is empty")
    else:
        path = Path(url).expanduser()
    return path if path.is_absolute() or base is None else base / path


def check_sink_url(url: str) -> None:
    """SinkUrlError unless ``url`` names a sink upsertmat can write (every kind of sink URL that
    :func:`~.sink.open_sink` opens passes). O(len(url))."""
    if not is_postgresql(url):
        sqlite_path(url)


def resolve_sink_url(url: str, base: Path) -> str:
    """``url`` with a SQLite file made absolute against ``base`` (a plain path); PostgreSQL URLs
    unchanged. SinkUrlError as :func:`sqlite_path`."""
    return url if is_postgresql(url) else str(sqlite_path(url, base))
