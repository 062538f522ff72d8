"""upsertmat.sinks — where the pipeline writes its table, each micro-batch exactly once.

One interface for writing (:class:`BatchSink`, a template method: the exactly-once check, empty
batches and error wrapping written once), one for everything else a sink URL is used for
(:class:`SinkKind`: parse, resolve, open, read back, drop, maintain), and the table of kinds
keyed by URL scheme (:mod:`.registry`). One module per sink: :mod:`.sqlite`, :mod:`.postgresql`,
:mod:`.delta`, :mod:`.iceberg`, :mod:`.paimon`; shared helpers in :mod:`.sql` (the SQL sinks), :mod:`.arrow`
(the lakehouse sinks' Arrow schema), :mod:`.reading` (snapshots, changes, positions) and
:mod:`.urls`. No pyspark import; each sink's client library is imported when that sink is used.
See docs/spark.md (*Sinks*) and docs/architecture.md (*Adding things*).
"""

from .base import BatchOutcome, BatchSink, Column, NetBatch, SinkError, SinkFailure, last_per_key
from .kind import SinkKind, SinkUrlError
from .reading import TableChange, TableSnapshot
from .registry import (
    KINDS,
    check_url,
    drop_results,
    kind_named,
    kind_of,
    last_batch,
    last_position,
    maintain,
    open_sink,
    read_changes,
    read_snapshot,
    resolve_url,
    snapshot_header,
)

__all__ = [
    "KINDS",
    "BatchOutcome",
    "BatchSink",
    "Column",
    "NetBatch",
    "SinkError",
    "SinkFailure",
    "SinkKind",
    "SinkUrlError",
    "TableChange",
    "TableSnapshot",
    "check_url",
    "drop_results",
    "kind_named",
    "kind_of",
    "last_batch",
    "last_per_key",
    "last_position",
    "maintain",
    "open_sink",
    "read_changes",
    "read_snapshot",
    "resolve_url",
    "snapshot_header",
]
