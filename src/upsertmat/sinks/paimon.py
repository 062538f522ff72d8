"""The Apache Paimon sink (``paimon:///warehouse``): a primary-key table merged on read, each
micro-batch ONE Paimon commit whose commit identifier is the batch id (``pypaimon``, Paimon's own
Python API: no JVM; the ``lakehouse`` extra).

**The table.** ``paimon:///dir`` is a filesystem-catalog warehouse; the sink's table is
``upsertmat.<table>`` (the directory ``dir/upsertmat.db/<table>``): a primary-key table keyed by
the sink's key, merge engine ``deduplicate``, :data:`DEFAULT_BUCKETS` fixed buckets, Parquet data
files, and one column more than the job writes, :data:`OP` (``_upsertmat_op``), which is the
table's ``rowkind.field``: pypaimon takes the row kind of a written row from such a column only.

**Writes follow the changes.** A batch's net changes (the last change of each key,
:func:`~.base.last_per_key`) are written as new level-0 data files, one per bucket the batch
touches: an upsert is a ``+U`` row (an upsert: Paimon keeps the row of the highest sequence
number whatever its kind, so a key that was not there is inserted), a delete a ``-D`` row holding
the key, its other columns null. Nothing already in the table is read or rewritten, so a batch
costs what it holds, not what the table holds (Delta's MERGE rewrites every file that holds a
touched key: about the whole table for keys spread over it). A reader merges the files by key:
the row of the highest sequence number wins, and a ``-U``/``-D`` row removes its key. Each file's
manifest entry gets its true count of ``-U``/``-D`` rows (:func:`retractions`: pypaimon 2.1 writes
0, which makes readers skip the merge of a one-file bucket).

**Written in the executors.** In the pipeline the data files are written where the rows are:
:meth:`PaimonSink.task_writer` gives a :class:`PaimonTaskWriter` that each Spark task runs over its
keys' net changes (every change of a key is in one task), returning its commit messages encoded in
Paimon's own wire format (:func:`encode_messages`, never pickled); the driver decodes them
(:func:`decode_messages`) and commits them as the batch's ONE snapshot
(:meth:`~.base.BatchSink.commit_written`). Two tasks may write files of one bucket: disjoint in
keys, each numbered above the bucket's committed sequence numbers. :meth:`~.base.BatchSink.apply_batch`
(the batch on the driver) writes the same files and commit; docs/spark.md, *Where a batch is written*.

**Exactly once.** The batch's commit user is ``upsertmat-<query id>`` and its commit identifier the
batch id, as Flink's Paimon sink commits a checkpoint. Before a batch is applied, the newest
snapshot of that commit user is read: a commit identifier at or above the batch id means the
batch is committed, and it is skipped. A Paimon commit writes the data files and manifests, then
renames ONE snapshot file (``snapshot/snapshot-<id>``) into place, so a SIGKILL at any moment
leaves the batch whole or absent (the files of an attempt killed before its rename are orphans
nothing references). The snapshot also carries ``upsertmat.batch`` and ``upsertmat.query`` in its
properties. An empty batch commits nothing.

**Reading.** A read is pinned to one snapshot id: pypaimon plans that snapshot's data files (its
manifests), and this module reads them with pyarrow and merges them in Arrow (:func:`live_rows`):
pypaimon's own reader merges a primary-key table row by row in Python: 13.6 s for a table of a
million rows where this merge takes under one (docs/spark.md). :meth:`PaimonKind.scan` is
pypaimon's own reader: what a downstream Python reader pays.

**Changes** (:func:`batch_changes`) are the difference, per key the batch wrote, between the table
at the snapshot before the batch's and at the batch's: ``-D``, ``+I`` or ``-U``/``+U``, nothing for
a row rewritten unchanged or a delete of a key the table did not hold. pypaimon 2.1 cannot produce
them as a Paimon changelog: its ``input`` producer writes the folded rows (an update's ``+U``
without its ``-U``), and ``lookup`` / ``full-compaction`` are not implemented. Positions are
:func:`~.reading.position` ``(batch_id, index)``; a batch's changes are computed once per process
and snapshot (snapshots never change), so a reader polling the newest batch pays one read.

**Maintenance** (:func:`maintain`). pypaimon 2.1 commits no compaction (a compact increment raises
``NotImplementedError``) and expires no snapshots; the sink's maintenance rewrites the table's
rows in ONE overwrite snapshot (each bucket one file: a read then merges nothing), refused if a
batch committed meanwhile. Snapshots and the files they reference stay on disk: expiring them
takes Paimon's Java tooling (Flink/Spark ``expire_snapshots``).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upsertmat.impls.build import needs_extra

from ..spec.changes import Row
from .arrow import arrow_schema, column_rows, net_arrays, sorted_rows
from .base import BatchSink, Column, NetBatch, SinkError, TaskOutput, TaskWriter
from .kind import SinkKind
from .reading import NO_TABLE, TableChange, TableSnapshot, guarded, position, same_row
from .urls import absolute, scheme_path

PREFIX = "paimon:///"
DATABASE = "upsertmat"
OP = "_upsertmat_op"
"""The row-kind column (the table's ``rowkind.field``): ``+U`` for an upsert, ``-D`` for a delete."""
SEQUENCE = "_SEQUENCE_NUMBER"
KIND = "_VALUE_KIND"
"""The system columns of a primary-key table's data files (Paimon's format)."""
RETRACTIONS = (1, 3)
"""``_VALUE_KIND`` of ``-U`` and ``-D``: the key is not in the table."""
BATCH_KEY = "upsertmat.batch"
QUERY_KEY = "upsertmat.query"
MAINTENANCE_KEY = "upsertmat.maintenance"
USER_PREFIX = "upsertmat-"
MAINTENANCE_USER = "upsertmat-maintenance"
DEFAULT_BUCKETS = 4
"""Fixed buckets of a table the sink creates. Paimon advises about 200 MB to 1 GB of data per
bucket; the sink's tables hold up to some millions of rows (tens to hundreds of MB), for which one
or two buckets would do: four give downstream readers four parallel splits and stay within the
advice up to a few GB, while a batch writes at most four files. A table created beforehand keeps
its own count."""
CHANGES_CACHED = 16
"""How many batches' computed changes a process keeps (newest used first)."""


def paimon_warehouse(url: str, base: Path | None = None) -> Path:
    """The warehouse directory of a ``paimon:`` URL (relative ones joined to ``base``)."""
    return scheme_path(url, PREFIX, "Paimon", base)


def commit_user(query_id: str) -> str:
    """The Paimon commit user of the batches of Spark query ``query_id``."""
    return USER_PREFIX + query_id


def _identifier(table: str) -> str:
    return f"{DATABASE}.{table}"


def load_catalog(warehouse: Path) -> Any:
    """The filesystem catalog (pypaimon's) on ``warehouse``; loading it creates nothing."""
    from pypaimon import CatalogFactory  # type: ignore[import-untyped]

    return CatalogFactory.create({"warehouse": str(warehouse.absolute())})


def open_table(warehouse: Path, table: str) -> Any | None:
    """The table ``upsertmat.<table>`` of ``warehouse`` (pypaimon's ``FileStoreTable``), or None
    when there is none."""
    from pypaimon.catalog.catalog_exception import (  # type: ignore[import-untyped]
        DatabaseNotExistException,
        TableNotExistException,
    )

    if not (warehouse / f"{DATABASE}.db" / table).is_dir():
        return None
    try:
        return load_catalog(warehouse).get_table(_identifier(table))
    except (TableNotExistException, DatabaseNotExistException):
        return None


def user_columns(table: Any) -> list[str]:
    """The table's columns without the row-kind column."""
    return [field.name for field in table.table_schema.fields if field.name != OP]


@dataclass
class _Staged:
    """A batch's transaction: the writer, the committer and the prepared commit messages."""

    write: Any = None
    commit: Any = None
    messages: Any = None
    batch: NetBatch | None = None

    def close(self) -> None:
        for part in (self.write, self.commit):
            if part is not None:
                with contextlib.suppress(Exception):  # closing releases memory only
                    part.close()


class PaimonSink(BatchSink):
    """A Paimon primary-key table ``upsertmat.<table>`` in the warehouse ``warehouse``, keyed by
    ``pk`` (created if missing). See the module docstring."""

    def __init__(
        self,
        warehouse: Path,
        table: str,
        columns: Sequence[Column],
        pk: Sequence[int],
        *,
        changelog: bool = False,
    ) -> None:
        try:
            import pypaimon  # noqa: F401
        except ImportError:
            raise SinkError("the Paimon sink " + needs_extra("lakehouse", " (pypaimon)")) from None
        if not pk:
            raise SinkError("the sink table needs a primary key")
        self.warehouse = warehouse
        self.table = table
        self.where = f"the Paimon sink {warehouse} ({_identifier(table)})"
        self.columns = tuple(columns)
        self.pk = tuple(pk)
        self.changelog = changelog  # changes are derived from the snapshots: nothing to turn on
        self.schema = arrow_schema(self.columns)
        self.names = [column.name for column in self.columns]
        self.keys = [self.names[index] for index in self.pk]
        try:
            self.paimon = self._open()
        except SinkError:
            raise
        except Exception as error:  # pypaimon raises ValueError, OSError, its own classes...
            raise SinkError(f"cannot open {self.where}: {type(error).__name__}: {error}") from None

    def _open(self) -> Any:
        import pyarrow as pa  # type: ignore[import-untyped]
        from pypaimon import Schema

        if OP in self.names:
            raise SinkError(f"a column may not be called {OP}: {self.where} uses it for the row kinds")
        catalog = load_catalog(self.warehouse)
        catalog.create_database(DATABASE, True)
        stored = pa.schema([*self.schema, pa.field(OP, pa.string())])
        options = {"bucket": str(DEFAULT_BUCKETS), "rowkind.field": OP, "file.format": "parquet"}
        catalog.create_table(
            _identifier(self.table),
            Schema.from_pyarrow_schema(stored, primary_keys=self.keys, options=options),
            True,
        )
        table = catalog.get_table(_identifier(self.table))
        found = user_columns(table)
        if found != self.names:
            raise SinkError(
                f"{self.where} has columns {found}, the job writes {self.names}: use another table"
            )
        stored_types = {field.name: field.type for field in file_schema(table, [*found, OP])}
        wanted = {field.name: field.type for field in self.schema}
        if any(stored_types[name] != wanted[name] for name in self.names):
            mine = {name: str(stored_types[name]) for name in self.names}
            raise SinkError(
                f"{self.where} has column types {mine}, the job writes "
                f"{ {name: str(kind) for name, kind in wanted.items()} }: use another table"
            )
        if table.table_schema.options.get("rowkind.field") != OP or stored_types[OP] != pa.string():
            raise SinkError(f"{self.where} has no row-kind column {OP}: it was not created by this sink")
        if list(table.primary_keys) != self.keys:
            raise SinkError(
                f"{self.where} has primary key {list(table.primary_keys)}, the job's is {self.keys}: "
                "use another table"
            )
        if table.options.bucket() < 1:
            raise SinkError(f"{self.where} has no fixed bucket count: the sink writes fixed-bucket tables")
        return table

    @contextlib.contextmanager
    def _begin(self) -> Iterator[_Staged]:
        """The batch's writer; on commit ONE snapshot (the data files are written by
        :meth:`_write`). Left by an exception, the files written are deleted (they are known to
        be uncommitted) and nothing is committed."""
        staged = _Staged()
        try:
            yield staged
        except BaseException:
            if staged.messages is not None:
                with contextlib.suppress(Exception):  # orphans at worst: nothing references them
                    staged.commit.abort(staged.messages)
            staged.close()
            raise
        try:
            if staged.batch is not None:
                batch = staged.batch
                staged.commit.commit(
                    staged.messages,
                    batch.batch_id,
                    snapshot_properties={BATCH_KEY: str(batch.batch_id), QUERY_KEY: batch.query_id},
                )
        finally:
            staged.close()

    def _committed(self, transaction: _Staged, query_id: str, batch_id: int) -> bool:
        done = last_identifier(self.paimon, commit_user(query_id))
        return done is not None and done >= batch_id

    def _write(self, transaction: _Staged, batch: NetBatch) -> None:
        data = net_table(self.columns, self.pk, batch)
        builder = self._builder(batch.query_id)
        transaction.write = builder.new_write()
        transaction.commit = builder.new_commit()
        transaction.messages = prepare_files(transaction.write, data, batch.batch_id)
        transaction.batch = batch

    def _builder(self, query_id: str) -> Any:
        builder = self.paimon.new_stream_write_builder()
        builder.commit_user = commit_user(query_id)  # pypaimon draws a random one otherwise
        return builder

    def task_writer(self, query_id: str, batch_id: int) -> PaimonTaskWriter:
        """The executors write the batch's data files (each task its keys' files, one per
        bucket it touches); the driver commits their messages as ONE snapshot."""
        return PaimonTaskWriter(str(self.warehouse), self.table, self.columns, self.pk, query_id, batch_id)

    def _stage_written(self, transaction: _Staged, batch: NetBatch, messages: Sequence[bytes]) -> None:
        transaction.commit = self._builder(batch.query_id).new_commit()
        transaction.messages = decode_messages(self.paimon, messages)
        transaction.batch = batch

    def rows(self) -> list[Row]:
        latest = self.paimon.snapshot_manager().get_latest_snapshot()
        if latest is None:
            return []
        return sorted_rows(table_rows(self.paimon, latest.id, self.names), self.names, self.keys)

    def committed_batches(self) -> int:
        return sum(1 for _ in batch_snapshots(self.paimon))


def net_table(columns: Sequence[Column], pk: Sequence[int], batch: NetBatch) -> Any:
    """The Arrow rows Paimon is given for ``batch``: each upsert a ``+U`` row, each delete a
    ``-D`` row holding its key (its other columns null), :data:`OP` their row kind. O(rows)."""
    import pyarrow as pa

    names = [column.name for column in columns]
    arrays = net_arrays(arrow_schema(columns), pk, batch)
    kinds = pa.array(["+U"] * len(batch.upserts) + ["-D"] * len(batch.deletes), type=pa.string())
    return pa.Table.from_arrays([*arrays, kinds], names=[*names, OP])


def prepare_files(write: Any, data: Any, batch_id: int) -> Any:
    """Write ``data`` with pypaimon's table ``write`` as new level-0 files and return their
    commit messages (nothing committed), each file's ``-U``/``-D`` count set (:func:`retractions`)."""
    write.write_arrow(data)
    messages = write.prepare_commit(batch_id)
    for message in messages:
        for file in message.new_files:
            file.delete_row_count = retractions(file.file_path)
    return messages


def encode_messages(table: Any, messages: Sequence[Any]) -> tuple[bytes, ...]:
    """Commit messages as bytes in Paimon's own wire format (Java's ``CommitMessageSerializer``
    v14, pypaimon's :mod:`pypaimon.write.commit_message_serializer`): plain data, decoded by
    parsing, never by unpickling."""
    from pypaimon.write.commit_message_serializer import (  # type: ignore[import-untyped]
        serialize_commit_message,
    )

    return tuple(serialize_commit_message(message, table.partition_keys_fields) for message in messages)


def decode_messages(table: Any, encoded: Sequence[bytes]) -> list[Any]:
    """The commit messages :func:`encode_messages` encoded, their files' paths resolved in the
    table's directory (the wire format carries file names; a writer elsewhere wrote into the
    same warehouse). ValueError for bytes that are not such messages."""
    from pypaimon.utils.file_store_path_factory import canonical_data_file_path  # type: ignore[import-untyped]
    from pypaimon.write.commit_message_serializer import deserialize_commit_message

    messages = [
        deserialize_commit_message(data, table.partition_keys_fields, table.trimmed_primary_keys_fields)
        for data in encoded
    ]
    for message in messages:
        for file in [*message.new_files, *message.changelog_files]:
            if file.external_path:
                raise ValueError(
                    f"the data file {file.file_name} has an external path: not written by the sink"
                )
            file.file_path = canonical_data_file_path(
                table, message.partition, message.bucket, file.file_name
            )
    return messages


@dataclass(frozen=True)
class PaimonTaskWriter(TaskWriter):
    """Writes one Spark task's part of a batch as Paimon data files in the executor it runs in
    and returns their encoded commit messages (:func:`encode_messages`); the driver's
    :meth:`PaimonSink.commit_written` commits every task's as ONE snapshot. A task holds every
    change of its keys, so no key is in two tasks' files; two tasks may write files of one bucket
    (disjoint keys, both numbered above the bucket's committed sequence numbers, which each
    writer reads from the table's latest snapshot: the batch before this one). A failed or
    duplicate attempt's files are referenced by no message the driver commits: orphans."""

    warehouse: str
    table: str
    columns: tuple[Column, ...]
    pk: tuple[int, ...]
    query_id: str
    batch_id: int

    def write(self, batch: NetBatch) -> TaskOutput:
        if batch.empty:
            return TaskOutput((), 0, 0)
        table = open_table(Path(self.warehouse), self.table)
        if table is None:
            raise SinkError(f"no Paimon table {_identifier(self.table)} in {self.warehouse}")
        builder = table.new_stream_write_builder()
        builder.commit_user = commit_user(self.query_id)
        write = builder.new_write()
        try:
            messages = prepare_files(write, net_table(self.columns, self.pk, batch), self.batch_id)
            return TaskOutput(encode_messages(table, messages), len(batch.upserts), len(batch.deletes))
        except BaseException:
            with contextlib.suppress(Exception):  # orphans at worst: nothing references them
                write.abort()
            raise
        finally:
            with contextlib.suppress(Exception):
                write.close()


def retractions(path: str) -> int:
    """The ``-U``/``-D`` rows of the data file at ``path``: what its manifest entry's
    ``_DELETE_ROW_COUNT`` must say. pypaimon 2.1 records 0 for every file it writes, and a reader
    (pypaimon's, Java's) then reads a bucket whose one file holds a ``-D`` without merging it,
    returning the deleted key as a row of nulls; the sink sets the true count before the commit.
    O(rows of the file), one column read."""
    import pyarrow as pa
    import pyarrow.compute as pc  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    kinds = pq.read_table(_local(path), columns=[KIND]).column(KIND)
    return int(pc.sum(pc.is_in(kinds, value_set=pa.array(RETRACTIONS, pa.int8()))).as_py() or 0)


def last_identifier(table: Any, user: str) -> int | None:
    """The commit identifier of ``user``'s newest snapshot (None: no retained snapshot of it),
    reading snapshots from the newest back. O(snapshots committed since)."""
    manager = table.snapshot_manager()
    latest = manager.get_latest_snapshot()
    if latest is None:
        return None
    for snapshot_id in range(latest.id, 0, -1):
        snapshot = latest if snapshot_id == latest.id else manager.get_snapshot_by_id(snapshot_id)
        if snapshot is None:  # expired: every older one is too
            return None
        if snapshot.commit_user == user:
            return int(snapshot.commit_identifier)
    return None


def _properties(snapshot: Any) -> dict[str, str]:
    return dict(snapshot.properties or {})


def batch_snapshots(table: Any) -> Iterator[tuple[int, Any]]:
    """(batch id, snapshot) of every retained snapshot a batch committed, oldest first
    (maintenance snapshots carry a batch id forward but are not batches). O(snapshots)."""
    for snapshot in table.snapshot_manager().list_snapshots():
        properties = _properties(snapshot)
        if BATCH_KEY in properties and MAINTENANCE_KEY not in properties:
            yield int(properties[BATCH_KEY]), snapshot


def data_files(table: Any, snapshot_id: int) -> list[Any]:
    """The data files (pypaimon's ``DataFileMeta``) of snapshot ``snapshot_id``, planned by
    pypaimon from its manifests. SinkError for what this module does not merge: deletion vectors,
    files of another schema. O(manifests)."""
    pinned = table.copy({"scan.snapshot-id": str(snapshot_id)})
    files: list[Any] = []
    schema_id = table.table_schema.id
    for split in pinned.new_read_builder().new_scan().plan().splits():
        if any(getattr(split, "data_deletion_files", None) or ()):
            raise SinkError(
                f"the Paimon table {table.identifier} has deletion vectors, which this sink does not read"
            )
        for file in split.files:
            if file.schema_id != schema_id:
                raise SinkError(
                    f"the Paimon table {table.identifier} holds files of schema {file.schema_id}, "
                    f"not of its schema {schema_id}: the sink reads no evolved schema"
                )
            files.append(file)
    return files


def _local(path: str) -> str:
    return path[len("file:") :] if path.startswith("file:") else path


def read_files(files: Sequence[Any], columns: Sequence[str], schema: Any) -> Any:
    """The rows of Paimon data ``files`` (Parquet or ORC), their ``columns`` (system columns
    included), as one Arrow table of ``schema``. O(their size)."""
    import pyarrow as pa
    import pyarrow.orc as orc  # type: ignore[import-untyped]
    import pyarrow.parquet as pq

    tables = []
    for file in files:
        path = _local(file.file_path)
        if path.endswith(".orc"):
            data = orc.read_table(path, columns=list(columns))
        else:
            data = pq.read_table(path, columns=list(columns))
        tables.append(data.cast(schema))
    if not tables:
        return schema.empty_table()
    return pa.concat_tables(tables)


def file_schema(table: Any, columns: Sequence[str]) -> Any:
    """The Arrow schema of ``columns`` of the table's data files: the system columns, then the
    table's own (all nullable)."""
    import pyarrow as pa
    from pypaimon.schema.data_types import PyarrowFieldParser  # type: ignore[import-untyped]

    fields = {field.name: field for field in PyarrowFieldParser.from_paimon_schema(table.table_schema.fields)}
    system = {SEQUENCE: pa.field(SEQUENCE, pa.int64()), KIND: pa.field(KIND, pa.int8())}
    return pa.schema([system.get(name) or fields[name].with_nullable(True) for name in columns])


def _grouping(column: Any) -> Any:
    """``column`` as a grouping key: a double by its bits (Paimon compares keys by their bytes, so
    -0.0 and 0.0 are two keys, as are two NaNs of different bits)."""
    import pyarrow as pa

    column = column.combine_chunks() if hasattr(column, "combine_chunks") else column
    if pa.types.is_floating(column.type):
        return column.cast(pa.float64()).view(pa.int64())
    return column


def newest_per_key(data: Any, keys: Sequence[str]) -> Any:
    """Of the Paimon file rows ``data`` (with :data:`SEQUENCE`), the row of the highest sequence
    number of every key, its kind kept. O(n log n) in Arrow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    count = data.num_rows
    if count <= 1:
        return data
    grouping = [_grouping(data.column(key)) for key in keys]
    names = [f"k{index}" for index in range(len(grouping))]
    order = pc.sort_indices(
        pa.table([*grouping, data.column(SEQUENCE)], names=[*names, "seq"]),
        sort_keys=[(name, "ascending") for name in [*names, "seq"]],
    )
    same: Any = None
    for column in grouping:
        ordered = column.take(order)
        equal = pc.fill_null(pc.equal(ordered.slice(0, count - 1), ordered.slice(1)), False)
        same = equal if same is None else pc.and_(same, equal)
    last = pa.concat_arrays([pc.invert(same), pa.array([True])])  # a key's last row: its newest
    return data.take(order.filter(last))


def live_rows(data: Any, keys: Sequence[str]) -> Any:
    """The rows a reader of Paimon file rows ``data`` sees (merge engine ``deduplicate``): per key
    the row of the highest sequence number, unless that row is a ``-U``/``-D``. O(n log n)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    newest = newest_per_key(data, keys)
    retracted = pc.is_in(newest.column(KIND), value_set=pa.array(RETRACTIONS, pa.int8()))
    return newest.filter(pc.invert(retracted))


def table_rows(table: Any, snapshot_id: int, names: Sequence[str]) -> Any:
    """The table's rows at ``snapshot_id``, columns ``names`` (Arrow, unordered). O(table)."""
    columns = [SEQUENCE, KIND, *dict.fromkeys([*table.primary_keys, *names])]
    data = read_files(data_files(table, snapshot_id), columns, file_schema(table, columns))
    return live_rows(data, table.primary_keys).select(list(names))


def _key_identity(value: Any) -> Any:
    """A key value as a dict key that keeps Paimon's keys apart (-0.0 is not 0.0)."""
    if isinstance(value, float):
        return (value, math.copysign(1.0, value))
    return value


_CHANGES: OrderedDict[tuple[Any, ...], list[tuple[str, Row]] | None] = OrderedDict()
_CHANGES_LOCK = threading.Lock()


def batch_changes(table: Any, snapshot: Any) -> list[tuple[str, Row]] | None:
    """The table changes of the batch committed as ``snapshot``: per key its files wrote, the row
    before (the table at the previous snapshot) against the row after: ``-D``, ``+I``,
    ``-U``/``+U``, nothing for an unchanged row; deletes first, then by key. None when the previous
    snapshot was expired (the changes can no longer be told). O(table) the first time, then
    cached for the process (a snapshot never changes)."""
    cache_key = (
        str(table.table_path),
        snapshot.id,
        snapshot.time_millis,
        snapshot.uuid,
        snapshot.commit_user,
    )
    with _CHANGES_LOCK:
        if cache_key in _CHANGES:
            _CHANGES.move_to_end(cache_key)
            return _CHANGES[cache_key]
    found = _compute_changes(table, snapshot)
    with _CHANGES_LOCK:
        _CHANGES[cache_key] = found
        while len(_CHANGES) > CHANGES_CACHED:
            _CHANGES.popitem(last=False)
    return found


def forget_changes() -> None:
    """Empty this process's cache of computed batch changes (to measure a first read)."""
    with _CHANGES_LOCK:
        _CHANGES.clear()


def _rows_with_keys(data: Any, keys_of: Any, keys: Sequence[str]) -> Any:
    """The indices of the rows of ``data`` whose key is a key of ``keys_of``: an Arrow hash join
    on the keys as :func:`_grouping` makes them (-0.0 is not 0.0, a NaN is its bits). O(n)."""
    import pyarrow as pa

    names = [f"k{index}" for index in range(len(keys))]
    wanted = pa.table([_grouping(keys_of.column(key)) for key in keys], names=names)
    marked = pa.table(
        [*(_grouping(data.column(key)) for key in keys), pa.array(range(data.num_rows), pa.int64())],
        names=[*names, "row"],
    )
    return marked.join(wanted, keys=names, join_type="left semi").column("row").combine_chunks()


def _compute_changes(table: Any, snapshot: Any) -> list[tuple[str, Row]] | None:
    import pyarrow as pa

    names = user_columns(table)
    keys = list(table.primary_keys)
    previous = None
    if snapshot.id > 1:
        previous = table.snapshot_manager().get_snapshot_by_id(snapshot.id - 1)
        if previous is None:
            return None
    before_files = [] if previous is None else data_files(table, previous.id)
    known = {file.file_name for file in before_files}
    written = [file for file in data_files(table, snapshot.id) if file.file_name not in known]
    columns = [SEQUENCE, KIND, *names]
    schema = file_schema(table, columns)
    new_rows = read_files(written, columns, schema)
    touched = newest_per_key(new_rows, keys).select(keys)
    older = read_files(before_files, columns, schema)
    if older.num_rows:
        older = older.take(_rows_with_keys(older, touched, keys))
    before = live_rows(older, keys)
    after = live_rows(pa.concat_tables([older, new_rows]), keys)
    key_index = [names.index(key) for key in keys]

    def by_key(data: Any) -> dict[Row, Row]:
        return {tuple(_key_identity(row[i]) for i in key_index): row for row in column_rows(data, names)}

    old, new = by_key(before), by_key(after)
    changes: list[tuple[str, Row]] = [("-D", old[key]) for key in sorted(set(old) - set(new))]
    for key in sorted(new):
        if key not in old:
            changes.append(("+I", new[key]))
        elif not same_row(old[key], new[key]):
            changes += [("-U", old[key]), ("+U", new[key])]
    return changes


def _batch_of(table: Any, snapshot: Any) -> tuple[int | None, Any]:
    """(the batch id ``snapshot`` holds, the newest batch snapshot at or before it): a maintenance
    snapshot carries the batch id of the batch before it."""
    manager = table.snapshot_manager()
    batch: int | None = None
    current = snapshot
    while current is not None:
        properties = _properties(current)
        if BATCH_KEY in properties:
            if batch is None:
                batch = int(properties[BATCH_KEY])
            if MAINTENANCE_KEY not in properties:
                return batch, current
        current = manager.get_snapshot_by_id(current.id - 1) if current.id > 1 else None
    return batch, None


def read_snapshot(warehouse: Path, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
    """The table at its latest snapshot (pinned: that one snapshot id read whole); the batch id
    it holds, the first ``limit`` rows by ``pk`` (``[]``: the table's primary key), the row count
    and the changelog position of the last batch's last change. :data:`~.reading.NO_TABLE`: no
    table. O(table) (with ``limit=0`` only the key columns are read)."""
    found = open_table(warehouse, table)
    if found is None:
        return NO_TABLE
    names = user_columns(found)
    keys = list(pk) or list(found.primary_keys)
    latest = found.snapshot_manager().get_latest_snapshot()
    if latest is None:
        return TableSnapshot(None, tuple(names), (), 0, 0)
    data = table_rows(found, latest.id, names if limit != 0 else list(found.primary_keys))
    rows = [] if limit == 0 else sorted_rows(data, names, keys, limit)
    batch, last = _batch_of(found, latest)
    pos = 0
    if last is not None:
        changes = batch_changes(found, last)
        last_batch = int(_properties(last)[BATCH_KEY])
        if changes:
            pos = position(last_batch, len(changes) - 1)
        elif changes is not None:
            pos = position(last_batch, 0) - 1
    return TableSnapshot(batch, tuple(names), tuple(rows), data.num_rows, pos)


def read_changes(
    warehouse: Path, table: str, after: int, limit: int, upto: int | None = None
) -> list[TableChange]:
    """The committed changes ``(pos, batch, op, row)`` at ``after < pos [<= upto]``, at most
    ``limit``, batch by batch (:func:`batch_changes`). O(snapshots) to list the batches, O(table)
    for each batch not read before in this process."""
    found = open_table(warehouse, table)
    if found is None:
        return []
    result: list[TableChange] = []
    for batch, snapshot in batch_snapshots(found):
        if position(batch, 1 << 31) <= after or (upto is not None and position(batch, 0) > upto):
            continue
        for offset, (op, row) in enumerate(batch_changes(found, snapshot) or ()):
            pos = position(batch, offset)
            if pos <= after or (upto is not None and pos > upto):
                continue
            result.append(TableChange(pos, batch, op, row))
            if len(result) >= limit:
                return result
    return result


class _AfterOnly:
    """pypaimon's snapshot commit, refusing every snapshot but the one right after ``base`` (a
    batch committed meanwhile: the rewrite would drop it)."""

    def __init__(self, inner: Any, base: int) -> None:
        self.inner = inner
        self.base = base
        self.refused = False

    def __enter__(self) -> _AfterOnly:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> Any:
        return self.inner.__exit__(*exc)

    def commit(self, base_uuid: Any, snapshot: Any, statistics: Any) -> bool:
        if snapshot.id != self.base + 1:
            self.refused = True
            return False
        return bool(self.inner.commit(base_uuid, snapshot, statistics))

    def close(self) -> None:
        self.inner.close()


@dataclass
class Rewrite:
    """A prepared maintenance rewrite of a table (:func:`prepare_rewrite`): its new data files,
    written, and the snapshot they replace."""

    table: Any
    base: Any
    write: Any
    commit: Any
    messages: Any
    rows: int
    files_before: int

    def commit_rewrite(self) -> dict[str, Any]:
        """Commit the rewrite as ONE overwrite snapshot right after the one it read; SinkError
        (its files deleted, the table untouched) if another snapshot came first."""
        guard = _AfterOnly(self.commit.file_store_commit.snapshot_commit, self.base.id)
        self.commit.file_store_commit.snapshot_commit = guard
        carried = {
            key: value for key, value in _properties(self.base).items() if key in (BATCH_KEY, QUERY_KEY)
        }
        try:
            self.commit.commit(self.messages, snapshot_properties={**carried, MAINTENANCE_KEY: "rewrite"})
        except Exception as error:
            with contextlib.suppress(Exception):
                self.commit.abort(self.messages)
            if guard.refused:
                raise SinkError(
                    f"the Paimon table {self.table.identifier} changed while maintenance rewrote it "
                    "(a batch was committed): nothing was changed; run maintenance between batches"
                ) from None
            raise SinkError(f"cannot rewrite the Paimon table {self.table.identifier}: {error}") from None
        finally:
            for part in (self.write, self.commit):
                with contextlib.suppress(Exception):
                    part.close()
        latest = self.table.snapshot_manager().get_latest_snapshot()
        return {
            "rows": self.rows,
            "files_before": self.files_before,
            "files_after": len(data_files(self.table, latest.id)),
            "snapshot": latest.id,
            "expired_snapshots": 0,
        }


def prepare_rewrite(table: Any) -> Rewrite | None:
    """The table's rows at its latest snapshot written as new data files (one per bucket) of an
    overwrite, not yet committed; None for a table without a snapshot. O(table)."""
    import pyarrow as pa

    base = table.snapshot_manager().get_latest_snapshot()
    if base is None:
        return None
    names = user_columns(table)
    before = data_files(table, base.id)
    rows = table_rows(table, base.id, names)
    data = rows.append_column(OP, pa.array(["+U"] * rows.num_rows, type=pa.string()))
    fixed = table.copy({"commit.max-retries": "0"})  # a refused snapshot fails at once
    builder = fixed.new_batch_write_builder().overwrite({})
    builder.commit_user = MAINTENANCE_USER
    write = builder.new_write()
    commit = builder.new_commit()
    if data.num_rows:
        write.write_arrow(data)
    messages = write.prepare_commit()
    return Rewrite(fixed, base, write, commit, messages, data.num_rows, len(before))


def maintain(warehouse: Path, table: str) -> dict[str, Any]:
    """The documented maintenance of a Paimon sink table: its rows rewritten in ONE overwrite
    snapshot (each bucket one sorted file: a reader merges nothing), which carries the last batch
    id forward; refused (SinkError, nothing changed) if a batch commits meanwhile, so run it
    between batches. pypaimon 2.1 offers no compaction and no snapshot expiry: snapshots and the
    files they reference stay. Returns counts ({} for no table). O(table)."""
    found = open_table(warehouse, table)
    if found is None:
        return {}
    rewrite = prepare_rewrite(found)
    if rewrite is None:
        return {}
    return rewrite.commit_rewrite()


def drop(warehouse: Path, table: str) -> None:
    """Drop ``upsertmat.<table>``: the filesystem catalog's table is its directory, which is
    removed with every file in it; nothing for a table that does not exist."""
    if open_table(warehouse, table) is None:
        return
    load_catalog(warehouse).drop_table(_identifier(table), True)


class PaimonKind(SinkKind):
    """``paimon:///rel/dir`` / ``paimon:////abs/dir``: a Paimon filesystem-catalog warehouse; the
    table is ``upsertmat.<table>``."""

    name = "paimon"
    forms = ("paimon:///…",)
    table_format = True
    commit_note = (
        "batch ids committed as the Paimon commit identifier of the same snapshot "
        "(commit user upsertmat-<query id>)"
    )

    def claims(self, url: str) -> bool:
        return url.startswith("paimon:")

    def resolve(self, url: str, base: Path) -> str:
        return absolute(PREFIX, paimon_warehouse(url, base))

    def local_path(self, url: str, base: Path | None = None) -> Path | None:
        return paimon_warehouse(url, base)

    def url_in(self, directory: Path, name: str) -> str:
        return absolute(PREFIX, directory / f"{name}-paimon")

    def open(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> PaimonSink:
        return PaimonSink(paimon_warehouse(url), table, columns, pk, changelog=changelog)

    def snapshot(self, url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
        return guarded(
            f"the sink table {table}", url, lambda: read_snapshot(paimon_warehouse(url), table, pk, limit)
        )

    def changes(
        self, url: str, table: str, after: int, limit: int, upto: int | None = None
    ) -> list[TableChange]:
        return guarded(
            f"the changes of {table}",
            url,
            lambda: read_changes(paimon_warehouse(url), table, after, limit, upto),
        )

    def drop(self, url: str, table: str) -> None:
        try:
            drop(paimon_warehouse(url), table)
        except SinkError:
            raise
        except Exception as error:
            raise SinkError(f"cannot drop the Paimon table {_identifier(table)} of {url}: {error}") from None

    def maintain(self, url: str, table: str, *, retention_hours: float | None = None) -> dict[str, Any]:
        """:func:`maintain`; ``retention_hours`` changes nothing (pypaimon deletes no files)."""
        try:
            return maintain(paimon_warehouse(url), table)
        except SinkError:
            raise
        except Exception as error:
            raise SinkError(
                f"cannot maintain the Paimon table {_identifier(table)} of {url}: "
                f"{type(error).__name__}: {error}"
            ) from None

    def scan(self, url: str, table: str) -> Any:
        """The current table read by pypaimon's own reader (its merge runs row by row in Python)."""
        found = open_table(paimon_warehouse(url), table)
        if found is None:
            raise SinkError(f"no Paimon table {_identifier(table)} in {url}")
        builder = found.new_read_builder().with_projection(user_columns(found))
        return builder.new_read().to_arrow(builder.new_scan().plan().splits())

    def data_files(self, url: str, table: str) -> int | None:
        found = open_table(paimon_warehouse(url), table)
        if found is None:
            return 0
        latest = found.snapshot_manager().get_latest_snapshot()
        return 0 if latest is None else len(data_files(found, latest.id))
