"""The Iceberg sink: each micro-batch one Iceberg transaction, committed exactly once through the
snapshot summary (``pyiceberg``; by default its SQL catalog on a local SQLite file).

A batch's net table changes (:func:`~.base.last_per_key`) are applied in ONE pyiceberg
transaction holding one overwrite snapshot (copy-on-write): every data file holding a key the
batch touches is replaced by a file of its other rows plus the rows whose last change adds; the
files holding no touched key stay. The snapshot carries ``upsertmat.batch`` and
``upsertmat.query`` in its summary properties, and the transaction also sets the table property
``upsertmat.batch.<query id>``; the catalog swaps the table's metadata in one atomic step, so
either all of it is committed or none. Before a batch is applied, the batch id is read back
(:func:`committed_batch`: the newest snapshot of the current branch that carries it, and the
table property, which survives snapshot expiry): a batch at or below it is skipped.

Deletes: the sink writes copy-on-write and no delete files, so a read never merges delete files
(a table holding delete files written by another writer is refused), and the number of data
files is bounded by :func:`maintain` (compaction: the table rewritten in one overwrite snapshot;
snapshot expiry; manifests merged on commit). An empty batch commits nothing.

Catalogs: ``iceberg:///dir`` keeps a SQL catalog on ``dir/catalog.db`` (SQLite) with its
warehouse in ``dir``; ``iceberg+catalog:NAME`` loads pyiceberg's configured catalog ``NAME``
(``.pyiceberg.yaml``, ``PYICEBERG_CATALOG__NAME__*``). Tables live in namespace :data:`NAMESPACE`.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from upsertmat.impls.build import needs_extra

from ..spec.changes import Row
from .arrow import arrow_schema, column_rows, columns_of, sorted_rows
from .base import BatchSink, Column, NetBatch, SinkError
from .kind import SinkKind, SinkUrlError
from .reading import NO_TABLE, TableChange, TableSnapshot, guarded, position, same_row
from .urls import absolute, scheme_path

PREFIX = "iceberg:///"
CATALOG_PREFIX = "iceberg+catalog:"

NAMESPACE = "upsertmat"
BATCH_KEY = "upsertmat.batch"
QUERY_KEY = "upsertmat.query"
MAINTENANCE_KEY = "upsertmat.maintenance"
PK_PROPERTY = "upsertmat.primary-key"
TABLE_PROPERTIES = {
    # Merge the manifests of many small commits (pyiceberg writes one per snapshot otherwise).
    "commit.manifest-merge.enabled": "true",
    "commit.manifest.min-count-to-merge": "16",
}


def iceberg_warehouse(url: str, base: Path | None = None) -> Path | None:
    """The warehouse directory of an ``iceberg:///`` URL (relative ones joined to ``base``), None
    for ``iceberg+catalog:NAME``; SinkUrlError if malformed."""
    if url.startswith(CATALOG_PREFIX):
        if not url[len(CATALOG_PREFIX) :].strip():
            raise SinkUrlError(f"{url!r} names no catalog: write iceberg+catalog:NAME")
        return None
    return scheme_path(url, PREFIX, "Iceberg", base)


def load_catalog(url: str) -> Any:
    """The pyiceberg catalog of an ``iceberg:`` URL (SinkError if pyiceberg is missing)."""
    try:
        from pyiceberg.catalog import load_catalog as load
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError:
        raise SinkError("the Iceberg sink " + needs_extra("lakehouse", " (pyiceberg)")) from None
    warehouse = iceberg_warehouse(url)
    if warehouse is None:
        return load(url[len(CATALOG_PREFIX) :].strip())
    warehouse.mkdir(parents=True, exist_ok=True)
    return SqlCatalog(
        "upsertmat",
        uri=f"sqlite:///{warehouse.resolve() / 'catalog.db'}",
        warehouse=warehouse.resolve().as_uri(),
    )


def properties_of(snapshot: Any) -> dict[str, str]:
    """A snapshot's summary properties (pyiceberg's ``Summary`` keeps them beside ``operation``)."""
    summary = snapshot.summary
    return {} if summary is None else dict(summary.additional_properties)


def property_key(query_id: str) -> str:
    """The table property holding the last batch committed by ``query_id``."""
    return f"{BATCH_KEY}.{query_id}"


def committed_batch(table: Any, query_id: str) -> int | None:
    """The greatest batch id of ``query_id`` the table holds (None: none): from the newest
    snapshot of the current branch whose summary carries one, and the table property."""
    found: int | None = None
    text = table.properties.get(property_key(query_id))
    if text is not None:
        found = int(text)
    snapshot = table.current_snapshot()
    while snapshot is not None:
        summary = properties_of(snapshot)
        if summary.get(QUERY_KEY) == query_id and BATCH_KEY in summary:
            batch = int(summary[BATCH_KEY])
            found = batch if found is None else max(found, batch)
            break
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return found


@dataclass
class _Staged:
    """A batch's transaction: the table at its current metadata and the pyiceberg transaction."""

    table: Any
    transaction: Any


class IcebergSink(BatchSink):
    """An Iceberg table ``upsertmat.<table>`` keyed by ``pk`` (created if missing)."""

    def __init__(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> None:
        if not pk:
            raise SinkError("the sink table needs a primary key")
        self.url = url
        self.table = table
        self.where = f"the Iceberg sink {url} table {NAMESPACE}.{table}"
        self.columns = tuple(columns)
        self.pk = tuple(pk)
        self.names = [column.name for column in self.columns]
        self.keys = [self.names[index] for index in self.pk]
        self.schema = arrow_schema(self.columns)
        try:
            self.catalog = load_catalog(url)
            self.catalog.create_namespace_if_not_exists(NAMESPACE)
            self._table = self.catalog.create_table_if_not_exists(
                (NAMESPACE, table),
                schema=self.schema,
                properties={**TABLE_PROPERTIES, PK_PROPERTY: ",".join(self.keys)},
            )
        except SinkError:
            raise
        except Exception as error:  # pyiceberg and its catalogs raise their own classes
            raise SinkError(f"cannot open {self.where}: {type(error).__name__}: {error}") from None
        found = [field.name for field in self._table.schema().fields]
        if found != self.names:
            raise SinkError(
                f"{self.where} has columns {found}, the job writes {self.names}: use another table"
            )

    @contextlib.contextmanager
    def _begin(self) -> Iterator[_Staged]:
        """The table refreshed to its current metadata and one pyiceberg transaction on it;
        leaving commits the transaction (the catalog swaps the table's metadata in one step)."""
        table = self._table
        table.refresh()
        with table.transaction() as transaction:
            yield _Staged(table, transaction)

    def _committed(self, transaction: _Staged, query_id: str, batch_id: int) -> bool:
        done = committed_batch(transaction.table, query_id)
        return done is not None and done >= batch_id

    def _write(self, transaction: _Staged, batch: NetBatch) -> None:
        """One overwrite snapshot: every data file holding a touched key rewritten without the
        touched keys' rows, plus the batch's upserted rows, written as new files; the other
        files kept. The files to rewrite are found by reading their key columns and joining them
        with the touched keys in Arrow (vectorised), not by a pyiceberg row filter: an ``In``
        filter over the batch's keys is bound once per literal and per evaluator (seven times a
        transaction), which took 80% of a 40,000-key batch's commit (docs/spark.md). O(rows of
        the files scanned)."""
        import pyarrow as pa  # type: ignore[import-untyped]

        table, upserts, deletes = transaction.table, batch.upserts, batch.deletes
        properties = {BATCH_KEY: str(batch.batch_id), QUERY_KEY: batch.query_id}
        fields = list(self.schema)
        added = columns_of(upserts, self.schema)
        key_columns = [
            [key[at] for key in deletes] + [row[index] for row in upserts] for at, index in enumerate(self.pk)
        ]
        touched = pa.Table.from_arrays(
            [
                _join_ready(pa, pa.array(values, fields[index].type))
                for values, index in zip(key_columns, self.pk, strict=True)
            ],
            names=self.keys,
        )
        rewritten, kept = self._rewrites(pa, table, touched)
        data = pa.concat_tables([*kept, added])
        staged = transaction.transaction
        with staged.update_snapshot(snapshot_properties=properties).overwrite() as snapshot:
            for data_file in rewritten:
                snapshot.delete_data_file(data_file)
            for data_file in _write_data_files(table, staged, snapshot.commit_uuid, data):
                snapshot.append_data_file(data_file)
        staged.set_properties({property_key(batch.query_id): str(batch.batch_id)})

    def _rewrites(self, pa: Any, table: Any, touched: Any) -> tuple[list[Any], list[Any]]:
        """(the data files holding a touched key, their other rows as Arrow tables of the sink's
        schema). Reads each live file's key columns; a file with a hit is read whole."""
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        rewritten: list[Any] = []
        kept: list[Any] = []
        if touched.num_rows == 0 or table.current_snapshot() is None:
            return rewritten, kept
        for task in table.scan().plan_files():
            if task.delete_files:  # written by another writer: this sink writes none
                raise SinkError(f"{self.where} holds delete files, which this sink does not read")
            path = task.file.file_path
            file_keys = self._join_keys(pa, pq.read_table(table.io.new_input(path).open(), columns=self.keys))
            if file_keys.join(touched, keys=self.keys, join_type="left semi").num_rows == 0:
                continue
            rows = pq.read_table(table.io.new_input(path).open(), columns=self.names)
            positions = pa.array(range(rows.num_rows), pa.int64())
            marked = self._join_keys(pa, rows).append_column("__row", positions)
            survivors = marked.join(touched, keys=self.keys, join_type="left anti").column("__row")
            rewritten.append(task.file)
            kept.append(rows.take(survivors.combine_chunks()).cast(self.schema))
        return rewritten, kept

    def _join_keys(self, pa: Any, rows: Any) -> Any:
        """The key columns of ``rows`` as hash-join keys (:func:`_join_ready`)."""
        columns = [_join_ready(pa, rows.column(name)) for name in self.keys]
        return pa.Table.from_arrays(columns, names=self.keys)

    def rows(self) -> list[Row]:
        self._table.refresh()
        return scan_rows(self._table, None, self.names, self.keys)

    def committed_batches(self) -> int:
        self._table.refresh()
        return len(batch_snapshots(self._table))


def _join_ready(pa: Any, column: Any) -> Any:
    """``column`` as a hash-join key: a double's -0.0 made 0.0 (Arrow hashes the two apart)."""
    import pyarrow.compute as pc  # type: ignore[import-untyped]

    return pc.add(column, 0.0) if pa.types.is_floating(column.type) else column


def _write_data_files(table: Any, transaction: Any, commit_uuid: Any, data: Any) -> Any:
    """``data`` (Arrow) written as the table's data files, the way pyiceberg's own ``overwrite``
    and ``delete`` write them; yields the data files (none for no rows).

    ``_dataframe_to_data_files`` is pyiceberg's internal function; the tests run this sink
    against the installed pyiceberg, so a rename fails them, not a user's batch silently.
    """
    import itertools

    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    if data.num_rows == 0:
        return iter(())
    return _dataframe_to_data_files(
        table_metadata=transaction.table_metadata,
        df=data,
        io=table.io,
        write_uuid=commit_uuid,
        counter=itertools.count(0),
    )


def scan_rows(table: Any, snapshot_id: int | None, names: Sequence[str], keys: Sequence[str]) -> list[Row]:
    """The rows of the table at ``snapshot_id`` (None: current), ordered by ``keys``."""
    return sorted_rows(table.scan(snapshot_id=snapshot_id).to_arrow(), names, keys)


def latest_batch(table: Any) -> int | None:
    """The batch id the current snapshot holds: that of the newest snapshot of the current branch
    that carries one (a compaction carries it forward). None: no batch."""
    snapshot = table.current_snapshot()
    while snapshot is not None:
        summary = properties_of(snapshot)
        if BATCH_KEY in summary:
            return int(summary[BATCH_KEY])
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    return None


def batch_snapshots(table: Any) -> dict[int, list[Any]]:
    """The snapshots of the current branch that carry a batch id, by batch id (oldest first);
    expired snapshots are gone from it."""
    chain = []
    snapshot = table.current_snapshot()
    while snapshot is not None:
        chain.append(snapshot)
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)
    found: dict[int, list[Any]] = {}
    for snapshot in reversed(chain):
        summary = properties_of(snapshot)
        if BATCH_KEY in summary and MAINTENANCE_KEY not in summary:
            found.setdefault(int(summary[BATCH_KEY]), []).append(snapshot)
    return found


def table_key(table: Any) -> list[str]:
    """The primary key columns the sink recorded in the table's properties ([]: none)."""
    return [name for name in table.properties.get(PK_PROPERTY, "").split(",") if name]


def _open(url: str, table: str) -> Any | None:
    catalog = load_catalog(url)
    if not catalog.table_exists((NAMESPACE, table)):
        return None
    return catalog.load_table((NAMESPACE, table))


def read_snapshot(url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
    """The table at its current snapshot (pinned: one snapshot id read whole);
    :data:`~.reading.NO_TABLE`: no table. O(rows)."""
    found = _open(url, table)
    if found is None:
        return NO_TABLE
    names = [field.name for field in found.schema().fields]
    pk = list(pk) or table_key(found) or names
    current = found.current_snapshot()
    snapshot_id = None if current is None else current.snapshot_id
    batches = batch_snapshots(found)
    batch = latest_batch(found)
    rows = [] if current is None else scan_rows(found, snapshot_id, names, pk)
    pos = 0
    if batches:
        last = max(batches)
        count = len(batch_changes(found, batches[last], names, pk))
        pos = position(last, count - 1) if count else position(last, 0) - 1
    return TableSnapshot(batch, tuple(names), tuple(rows if limit is None else rows[:limit]), len(rows), pos)


def _files(table: Any, snapshot: Any) -> tuple[list[str], list[str]]:
    """(data files added, data files removed) by one snapshot (its own manifest entries)."""
    added: list[str] = []
    removed: list[str] = []
    for manifest in snapshot.manifests(table.io):
        if manifest.added_snapshot_id != snapshot.snapshot_id:
            continue
        for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=False):
            if entry.snapshot_id != snapshot.snapshot_id:
                continue
            status = int(entry.status)
            (added if status == 1 else removed if status == 2 else []).append(entry.data_file.file_path)
    return added, removed


def batch_changes(
    table: Any, snapshots: Sequence[Any], names: Sequence[str], pk: Sequence[str]
) -> list[tuple[str, Row]]:
    """The table changes of one batch, from the data files its snapshots added and removed
    (copy-on-write: a rewritten file's untouched rows appear on both sides and cancel): per key,
    the row before (in a removed file) and after (in an added file): ``-D``, ``+I`` or
    ``-U``/``+U``; deletes first, then by key. O(rows of the touched files)."""
    import pyarrow.parquet as pq

    added: list[str] = []
    removed: list[str] = []
    for snapshot in snapshots:
        more, gone = _files(table, snapshot)
        added += more
        removed += gone
    both = set(added) & set(removed)  # written and rewritten inside the batch
    key_index = [names.index(key) for key in pk]

    def rows_of(paths: list[str]) -> dict[Row, Row]:
        found: dict[Row, Row] = {}
        for path in paths:
            if path in both:
                continue
            data = pq.read_table(table.io.new_input(path).open()).select(list(names))
            for row in column_rows(data, names):
                found[tuple(row[i] for i in key_index)] = tuple(row)
        return found

    before, after = rows_of(removed), rows_of(added)
    deletes = [("-D", before[key]) for key in sorted(set(before) - set(after))]
    changes: list[tuple[str, Row]] = []
    for key in sorted(after):
        old = before.get(key)
        if old is None:
            changes.append(("+I", after[key]))
        elif not same_row(old, after[key]):
            changes += [("-U", old), ("+U", after[key])]
    return deletes + changes


def read_changes(
    url: str, table: str, pk: Sequence[str], after: int, limit: int, upto: int | None = None
) -> list[TableChange]:
    """The committed changes ``(pos, batch, op, row)`` at ``after < pos [<= upto]``, at most
    ``limit``, computed per batch from the files its snapshots added and removed (positions as
    :func:`~.reading.position`). Expired snapshots' batches are no longer readable."""
    found_table = _open(url, table)
    if found_table is None:
        return []
    names = [field.name for field in found_table.schema().fields]
    pk = (
        list(pk) or [name for name in found_table.properties.get(PK_PROPERTY, "").split(",") if name] or names
    )
    found: list[TableChange] = []
    for batch, snapshots in sorted(batch_snapshots(found_table).items()):
        if position(batch, 1 << 31) <= after or (upto is not None and position(batch, 0) > upto):
            continue
        for offset, (op, row) in enumerate(batch_changes(found_table, snapshots, names, pk)):
            pos = position(batch, offset)
            if pos <= after or (upto is not None and pos > upto):
                continue
            found.append(TableChange(pos, batch, op, row))
            if len(found) >= limit:
                return found
    return found


def maintain(url: str, table: str, *, keep_snapshots: int = 1) -> dict[str, Any]:
    """The documented maintenance of an Iceberg sink table: compaction (the current rows rewritten
    in one overwrite snapshot that carries the last batch's summary properties forward, so the
    exactly-once check still finds them), then expiry of all but the newest ``keep_snapshots``
    snapshots (their files are no longer referenced; pyiceberg does not delete orphan files).
    Do not run it while a job writes the table (the job's commit would then conflict and fail
    the batch, which a rerun applies). Returns counts."""
    found = _open(url, table)
    if found is None:
        return {}
    current = found.current_snapshot()
    summary = {} if current is None else properties_of(current)
    carried = {key: value for key, value in summary.items() if key in (BATCH_KEY, QUERY_KEY)}
    carried[MAINTENANCE_KEY] = "compact"
    data = found.scan().to_arrow()
    found.overwrite(data, snapshot_properties=carried)
    found.refresh()
    snapshots = sorted(found.snapshots(), key=lambda snapshot: snapshot.timestamp_ms)
    expired = 0
    if len(snapshots) > keep_snapshots:
        newest = snapshots[-keep_snapshots]
        expire = found.maintenance.expire_snapshots().older_than(
            datetime.fromtimestamp(newest.timestamp_ms / 1000, tz=UTC)
        )
        expire.commit()
        found.refresh()
        expired = len(snapshots) - len(found.snapshots())
    return {"rows": data.num_rows, "expired_snapshots": expired, "snapshots": len(found.snapshots())}


def drop(url: str, table: str) -> None:
    """Drop ``upsertmat.<table>`` from its catalog, then remove the table's directory (its data and
    metadata files, those of expired snapshots too). Nothing for a table that does not exist, a
    warehouse without a catalog yet, or a second drop (a drop that failed half way is finished).
    For an ``iceberg:///`` warehouse the directory removed must lie inside it (SinkError
    otherwise: those files are not the sink's)."""
    from urllib.parse import unquote, urlparse

    warehouse = iceberg_warehouse(url)
    if warehouse is not None and not (warehouse / "catalog.db").exists():
        return
    catalog = load_catalog(url)
    location: Path | None = None
    if warehouse is not None:
        location = warehouse.resolve() / f"{NAMESPACE}.db" / table  # the catalog's default place
    present = catalog.table_exists((NAMESPACE, table))
    if present:
        found = str(catalog.load_table((NAMESPACE, table)).location())
        location = Path(unquote(urlparse(found).path)) if found.startswith("file:") else None
    if warehouse is not None and location is not None and warehouse.resolve() not in location.parents:
        raise SinkError(f"the Iceberg table {table} lies at {location}, outside its warehouse {warehouse}")
    if present:
        catalog.drop_table((NAMESPACE, table))
    if location is not None:
        shutil.rmtree(location, ignore_errors=True)


class IcebergKind(SinkKind):
    """``iceberg:///rel/dir`` / ``iceberg:////abs/dir`` (a warehouse directory with its SQL catalog
    on ``dir/catalog.db``) and ``iceberg+catalog:NAME`` (a catalog pyiceberg's configuration names);
    the table is ``upsertmat.<table>``."""

    name = "iceberg"
    forms = ("iceberg:///…", "iceberg+catalog:NAME")
    table_format = True
    commit_note = "batch ids committed in the summary of the same Iceberg snapshot"

    def claims(self, url: str) -> bool:
        return url.startswith(("iceberg:", CATALOG_PREFIX))

    def resolve(self, url: str, base: Path) -> str:
        warehouse = iceberg_warehouse(url, base)
        return url if warehouse is None else absolute(PREFIX, warehouse)

    def local_path(self, url: str, base: Path | None = None) -> Path | None:
        return iceberg_warehouse(url, base)

    def url_in(self, directory: Path, name: str) -> str:
        return absolute(PREFIX, directory / f"{name}-iceberg")

    def open(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> IcebergSink:
        return IcebergSink(url, table, columns, pk, changelog=changelog)

    def snapshot(self, url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
        return guarded(f"the sink table {table}", url, lambda: read_snapshot(url, table, pk, limit))

    def changes(
        self, url: str, table: str, after: int, limit: int, upto: int | None = None
    ) -> list[TableChange]:
        return guarded(
            f"the changes of {table}", url, lambda: read_changes(url, table, [], after, limit, upto)
        )

    def drop(self, url: str, table: str) -> None:
        try:
            drop(url, table)
        except SinkError:
            raise
        except Exception as error:
            raise SinkError(f"cannot drop the Iceberg table {NAMESPACE}.{table} of {url}: {error}") from None

    def maintain(self, url: str, table: str, *, retention_hours: float | None = None) -> dict[str, Any]:
        """:func:`maintain`: every snapshot but the newest expires whatever ``retention_hours``
        says (pyiceberg deletes no orphan files, so expired snapshots' files stay on disk)."""
        return maintain(url, table)

    def scan(self, url: str, table: str) -> Any:
        return load_catalog(url).load_table((NAMESPACE, table)).scan().to_arrow()

    def data_files(self, url: str, table: str) -> int | None:
        return len(list(load_catalog(url).load_table((NAMESPACE, table)).scan().plan_files()))
