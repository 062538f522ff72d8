"""Sink URLs, one convention everywhere: SQLAlchemy's.

``sqlite:///rel/path.db`` (three slashes) is a path relative to a base directory (the working
directory for a URL given on the command line or to :class:`~upsertmat.spark.PipelineConfig`);
``sqlite:////abs/path.db`` (four slashes) is absolute; a URL without a scheme is a plain file
path, relative or absolute as written. ``postgresql://…`` / ``postgres://…`` name a PostgreSQL
database. Lakehouse tables take the same slashes: ``delta:///rel/dir`` / ``delta:////abs/dir`` a
Delta Lake table directory; ``iceberg:///rel/dir`` / ``iceberg:////abs/dir`` an Iceberg warehouse
directory with its SQL catalog on SQLite (``<dir>/catalog.db``), and ``iceberg+catalog:NAME`` a
catalog pyiceberg's own configuration names (``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__NAME__*``
variables); the table is the sink's table name in namespace ``upsertmat``. Anything else
(``sqlite://`` without a path, ``mysql://``) is refused. No pyspark import: loading jobs uses
this without Spark. O(len(url)).
"""

from __future__ import annotations

from pathlib import Path

SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")
DELTA_PREFIX = "delta:///"
ICEBERG_PREFIX = "iceberg:///"
ICEBERG_CATALOG_PREFIX = "iceberg+catalog:"


class SinkUrlError(ValueError):
    """A sink URL that names no database upsertmat can write."""


def is_postgresql(url: str) -> bool:
    """True for ``postgresql://`` and ``postgres://`` URLs."""
    return url.startswith(POSTGRES_PREFIXES)


def is_delta(url: str) -> bool:
    """True for ``delta:`` URLs (a Delta Lake table)."""
    return url.startswith("delta:")


def is_iceberg(url: str) -> bool:
    """True for ``iceberg:`` and ``iceberg+catalog:`` URLs (an Iceberg table)."""
    return url.startswith(("iceberg:", ICEBERG_CATALOG_PREFIX))


def is_lakehouse(url: str) -> bool:
    """True for Delta Lake and Iceberg sinks."""
    return is_delta(url) or is_iceberg(url)


def _scheme_path(url: str, prefix: str, what: str, base: Path | None) -> Path:
    if not url.startswith(prefix) or len(url) == len(prefix):
        scheme = prefix.split(":")[0]
        raise SinkUrlError(
            f"unsupported {what} URL {url!r}: write {scheme}:///relative/dir or {scheme}:////absolute/dir "
            "(three slashes: relative, four: absolute, as for sqlite:)"
        )
    path = Path(url[len(prefix) :])
    return path if path.is_absolute() or base is None else base / path


def delta_location(url: str, base: Path | None = None) -> Path:
    """The Delta table directory of a ``delta:`` URL (relative ones joined to ``base``)."""
    return _scheme_path(url, DELTA_PREFIX, "Delta Lake", base)


def iceberg_warehouse(url: str, base: Path | None = None) -> Path | None:
    """The warehouse directory of an ``iceberg:///`` URL (None for ``iceberg+catalog:NAME``)."""
    if url.startswith(ICEBERG_CATALOG_PREFIX):
        if not url[len(ICEBERG_CATALOG_PREFIX) :].strip():
            raise SinkUrlError(f"{url!r} names no catalog: write iceberg+catalog:NAME")
        return None
    return _scheme_path(url, ICEBERG_PREFIX, "Iceberg", base)


def sqlite_path(url: str, base: Path | None = None) -> Path:
    """The SQLite file a non-PostgreSQL ``url`` names; a relative one is joined to ``base``
    (default: left relative, i.e. to the working directory). SinkUrlError if it names none."""
    if is_postgresql(url) or is_lakehouse(url):
        raise SinkUrlError(f"not a SQLite sink: {url}")
    if url.startswith("sqlite:"):
        if not url.startswith(SQLITE_PREFIX) or len(url) == len(SQLITE_PREFIX):
            raise SinkUrlError(
                f"unsupported SQLite URL {url!r}: write sqlite:///relative/path.db or "
                "sqlite:////absolute/path.db (SQLAlchemy's convention), or a plain file path"
            )
        path = Path(url[len(SQLITE_PREFIX) :])
    elif "://" in url:
        raise SinkUrlError(
            f"unsupported database URL {url!r} (a SQLite path, sqlite:///…, postgresql://…, delta:///…, "
            "iceberg:///…, iceberg+catalog:NAME)"
        )
    elif not url.strip():
        raise SinkUrlError("the sink URL is empty")
    else:
        path = Path(url).expanduser()
    return path if path.is_absolute() or base is None else base / path


def check_sink_url(url: str) -> None:
    """SinkUrlError unless ``url`` names a sink upsertmat can write (every kind of sink URL that
    :func:`~.sinks.open_sink` opens passes). O(len(url))."""
    if is_postgresql(url):
        return
    if is_delta(url):
        delta_location(url)
    elif is_iceberg(url):
        iceberg_warehouse(url)
    else:
        sqlite_path(url)


def resolve_sink_url(url: str, base: Path) -> str:
    """``url`` with a SQLite file made absolute against ``base`` (a plain path), a Delta table or an
    Iceberg warehouse made absolute (``delta:////abs``); PostgreSQL URLs and named Iceberg
    catalogs unchanged. SinkUrlError as :func:`sqlite_path`."""
    if is_postgresql(url):
        return url
    if is_delta(url):
        return DELTA_PREFIX + str(delta_location(url, base).resolve())
    if is_iceberg(url):
        warehouse = iceberg_warehouse(url, base)
        return url if warehouse is None else ICEBERG_PREFIX + str(warehouse.resolve())
    return str(sqlite_path(url, base))
