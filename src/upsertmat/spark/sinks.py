"""Every sink of the pipeline, opened by its URL: :func:`open_sink`.

The SQL sinks (:class:`~.sink.SqliteSink`, :class:`~.sink.PostgresSink`) and the lakehouse ones
(:class:`~.delta.DeltaSink`, :class:`~.iceberg.IcebergSink`, imported only for their URLs: they
need the ``lakehouse`` extra) all implement :class:`~.sink.BatchSink`; this module is the one
that knows them all, so none of them imports another's module.
"""

from __future__ import annotations

from collections.abc import Sequence

from .sink import BatchSink, Column, PostgresSink, SinkError, SqliteSink
from .sinkurl import SinkUrlError, delta_location, is_delta, is_iceberg, is_postgresql, sqlite_path


def open_sink(
    url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
) -> BatchSink:
    """The sink for ``url`` (:mod:`.sinkurl`: ``postgresql://...``, ``sqlite:///relative.db``,
    ``sqlite:////absolute.db``, a file path, ``delta:///…``, ``iceberg:///…``). ``changelog``:
    record every committed batch's table changes (SQL: :data:`CHANGES_TABLE`; Delta: its change
    data feed)."""
    if is_delta(url):
        from .delta import DeltaSink

        return DeltaSink(delta_location(url), table, columns, pk, changelog=changelog)
    if is_iceberg(url):
        from .iceberg import IcebergSink

        return IcebergSink(url, table, columns, pk, changelog=changelog)
    if is_postgresql(url):
        return PostgresSink(url, table, columns, pk, changelog=changelog)
    try:
        path = sqlite_path(url)
    except SinkUrlError as error:
        raise SinkError(str(error)) from None
    return SqliteSink(path, table, columns, pk, changelog=changelog)
