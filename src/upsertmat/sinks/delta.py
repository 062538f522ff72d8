"""The Delta Lake sink (``delta:///dir``): each micro-batch one MERGE, committed exactly once
through Delta's application transactions (``deltalake``, delta-rs: no JVM jars; the
``lakehouse`` extra).

A batch's net table changes (the last change of each primary key: upserts and deletes,
:func:`~.base.last_per_key`) are MERGEd by the primary key in ONE commit that also carries the
application transaction ``txn {appId: <query id>, version: <batch id>}`` and, in its commit
info, ``upsertmat.batch`` / ``upsertmat.query``. Before a batch is applied the table's latest
``txn`` version of the query is read back: a batch id at or below it was committed (Spark re-runs
only the batch whose commit did not reach its checkpoint, with the same id), so the batch is
skipped. A commit either happened whole (data files, txn and commit info are one log entry
written atomically) or not at all, so a SIGKILL at any moment leaves either state.

The MERGE deletes matched keys of ``-U``/``-D``, updates matched keys whose row differs
(``IS DISTINCT FROM`` on the other columns, so an unchanged row is not rewritten and makes no
change record), inserts the rest. delta-rs merges **copy-on-write**: every data file holding a
matched row is rewritten, so with keys spread over the table a batch rewrites about the whole
table (docs/spark.md, *Which sink for which table*); :func:`maintain` compacts small files and
vacuums removed ones.

``changelog=True`` turns on the table's change data feed (``delta.enableChangeDataFeed``): the
committed changes are read from it (:func:`read_changes`). A change's position is
:func:`~.reading.position` ``(batch_id, index)``. An empty batch commits nothing. Miss explanations
are counted in the progress, not stored (no side table in a lakehouse sink).
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from upsertmat.impls.build import needs_extra

from ..spec.changes import Row
from .arrow import arrow_schema, column_rows, net_arrays, sorted_rows
from .base import BatchSink, Column, NetBatch, SinkError
from .kind import SinkKind, SinkUrlError
from .reading import NO_TABLE, TableChange, TableSnapshot, guarded, position
from .urls import absolute, scheme_path

PREFIX = "delta:///"
BATCH_KEY = "upsertmat.batch"
QUERY_KEY = "upsertmat.query"
OP = "_upsertmat_op"
CDF = "delta.enableChangeDataFeed"
DEFAULT_RETENTION_HOURS = 168
"""Delta's own default retention of removed files (7 days)."""
DESCRIPTION = "upsertmat sink; primary key: "
"""The table's description names its primary key (Delta has no primary keys; the change feed is
ordered by it)."""


def delta_location(url: str, base: Path | None = None) -> Path:
    """The Delta table directory of a ``delta:`` URL (relative ones joined to ``base``)."""
    return scheme_path(url, PREFIX, "Delta Lake", base)


def _quote(name: str) -> str:
    """A SQL identifier for delta-rs's predicates (DataFusion: double quotes)."""
    return '"' + name.replace('"', '""') + '"'


@dataclass
class _Staged:
    """A batch's transaction: the table at its current version and the MERGE to execute on commit."""

    table: Any
    merger: Any = None


class DeltaSink(BatchSink):
    """A Delta table at ``path`` keyed by ``pk`` (created if missing). See the module docstring."""

    def __init__(
        self, path: Path, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> None:
        try:
            import deltalake
        except ImportError:
            raise SinkError("the Delta Lake sink " + needs_extra("lakehouse", " (deltalake)")) from None
        if not pk:
            raise SinkError("the sink table needs a primary key")
        self.deltalake = deltalake
        self.path = path
        self.table = table
        self.where = f"the Delta Lake sink {path}"
        self.columns = tuple(columns)
        self.pk = tuple(pk)
        self.changelog = changelog
        self.schema = arrow_schema(self.columns)
        names = [column.name for column in self.columns]
        self.names = names
        self.keys = [names[index] for index in self.pk]
        self.others = [name for index, name in enumerate(names) if index not in self.pk]
        self.predicate = " AND ".join(f"t.{_quote(key)} = s.{_quote(key)}" for key in self.keys)
        self.differs = " OR ".join(
            f"(t.{_quote(name)} IS DISTINCT FROM s.{_quote(name)})" for name in self.others
        )
        try:
            self._open()
        except SinkError:
            raise
        except Exception as error:  # delta-rs raises its own error classes (DeltaError, OSError...)
            raise SinkError(f"cannot open {self.where}: {type(error).__name__}: {error}") from None

    def _open(self) -> None:
        deltalake = self.deltalake
        configuration = {CDF: "true"} if self.changelog else None
        if not deltalake.DeltaTable.is_deltatable(str(self.path)):
            self.path.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(Exception):  # a concurrent creator won: check below
                deltalake.DeltaTable.create(
                    str(self.path),
                    schema=self.schema,
                    mode="ignore",
                    configuration=configuration,
                    name=self.table,
                    description=DESCRIPTION + ",".join(self.keys),
                )
        table = deltalake.DeltaTable(str(self.path))
        found = [field.name for field in table.schema().fields]
        if found != self.names:
            raise SinkError(
                f"{self.where} has columns {found}, the job writes {self.names}: use another table path"
            )
        if self.changelog and table.metadata().configuration.get(CDF) != "true":
            table.alter.set_table_properties({CDF: "true"})

    def _table(self) -> Any:
        return self.deltalake.DeltaTable(str(self.path))

    @contextlib.contextmanager
    def _begin(self) -> Iterator[_Staged]:
        """The table at its current version; on commit the staged MERGE runs (data files and
        the log entry with the txn in one delta-rs call)."""
        staged = _Staged(self._table())
        yield staged
        if staged.merger is not None:
            staged.merger.execute()

    def _committed(self, transaction: _Staged, query_id: str, batch_id: int) -> bool:
        done = transaction.table.transaction_version(query_id)
        return done is not None and done >= batch_id

    def _write(self, transaction: _Staged, batch: NetBatch) -> None:
        import pyarrow as pa  # type: ignore[import-untyped]

        names = self.names
        arrays = net_arrays(self.schema, self.pk, batch)
        ops = pa.array(["U"] * len(batch.upserts) + ["D"] * len(batch.deletes), type=pa.string())
        source = pa.Table.from_arrays([*arrays, ops], names=[*names, OP])
        deltalake = self.deltalake
        properties = deltalake.CommitProperties(
            app_transactions=[deltalake.Transaction(app_id=batch.query_id, version=batch.batch_id)],
            custom_metadata={BATCH_KEY: str(batch.batch_id), QUERY_KEY: batch.query_id},
        )
        merger = transaction.table.merge(
            source, self.predicate, source_alias="s", target_alias="t", commit_properties=properties
        )
        merger = merger.when_matched_delete(predicate=f"s.{OP} = 'D'")
        if self.others:
            merger = merger.when_matched_update(
                updates={_quote(name): f"s.{_quote(name)}" for name in self.others},
                predicate=f"s.{OP} = 'U' AND ({self.differs})",
            )
        transaction.merger = merger.when_not_matched_insert(
            updates={_quote(name): f"s.{_quote(name)}" for name in names}, predicate=f"s.{OP} = 'U'"
        )

    def rows(self) -> list[Row]:
        import pyarrow as pa

        data = pa.table(self._table().to_pyarrow_table())
        return sorted_rows(data, self.names, self.keys)

    def committed_batches(self) -> int:
        return sum(1 for _ in our_commits(self._table()))


def change_count(metrics: dict[str, Any]) -> int:
    """The change records a MERGE made (its change data feed rows): inserts, deletes, and an
    update's pre- and post-image."""
    return (
        int(metrics.get("num_target_rows_inserted", 0))
        + int(metrics.get("num_target_rows_deleted", 0))
        + 2 * int(metrics.get("num_target_rows_updated", 0))
    )


def our_commits(table: Any) -> Iterator[dict[str, Any]]:
    """The commit infos of the batches upsertmat committed to ``table``, newest first (the
    table's history; maintenance commits have no ``upsertmat.batch``)."""
    for commit in table.history():
        if BATCH_KEY in commit:
            yield commit


def changes_end(table: Any) -> int:
    """The position of the last change recorded (0: none)."""
    for commit in our_commits(table):
        count = change_count(commit.get("operationMetrics") or {})
        if count:
            return position(int(commit[BATCH_KEY]), count - 1)
    return 0


def primary_key(table: Any) -> list[str]:
    """The primary key columns the table's description names ([] if it names none)."""
    description = table.metadata().description or ""
    if not description.startswith(DESCRIPTION):
        return []
    return [name for name in description[len(DESCRIPTION) :].split(",") if name]


def read_snapshot(path: Path, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
    """The table at its current version, read from that one pinned version
    (:data:`~.reading.NO_TABLE`: no table yet): the rows sorted in Arrow and only the first
    ``limit`` turned into Python rows; with ``limit=0`` the row count comes from the log's file
    statistics when every file has them (no data read). O(rows) in Arrow, O(limit) in Python."""
    import deltalake
    import pyarrow as pa

    if not deltalake.DeltaTable.is_deltatable(str(path)):
        return NO_TABLE
    table = deltalake.DeltaTable(str(path))
    names = [field.name for field in table.schema().fields]
    pk = list(pk) or primary_key(table)
    batch = next((int(commit[BATCH_KEY]) for commit in our_commits(table)), None)
    counted = _counted_rows(table) if limit == 0 else None
    if counted is not None:
        rows: list[Row] = []
        total = counted
    else:
        data = pa.table(table.to_pyarrow_table())
        rows, total = sorted_rows(data, names, pk, limit), data.num_rows
    return TableSnapshot(
        batch_id=batch, columns=tuple(names), rows=tuple(rows), total=total, changes_pos=changes_end(table)
    )


def _counted_rows(table: Any) -> int | None:
    """The table's rows from its log's per-file ``numRecords`` (None if a file has none)."""
    import pyarrow as pa

    actions = pa.table(table.get_add_actions(flatten=True))
    if "num_records" not in actions.column_names:
        return None
    counts = actions.column("num_records").to_pylist()
    if any(count is None for count in counts):
        return None
    return int(sum(counts))


_KINDS = {"delete": 0, "update_preimage": 1, "update_postimage": 2, "insert": 3}
_OPS = {"delete": "-D", "update_preimage": "-U", "update_postimage": "+U", "insert": "+I"}


def read_changes(
    path: Path, pk: Sequence[str], after: int, limit: int, upto: int | None = None
) -> list[TableChange]:
    """The committed changes at positions ``after < pos [<= upto]``, at most ``limit``, from the
    change data feed of each batch commit that holds such positions. Within a commit: the
    deletes by key, then per key ``+I`` or ``-U``/``+U`` (a fixed order, so positions are
    stable). O(history) to find the commits, O(their changes) to read them. ``pk``: the primary
    key columns ([]: the ones the table's description names)."""
    import deltalake
    import pyarrow as pa

    if not deltalake.DeltaTable.is_deltatable(str(path)):
        return []
    table = deltalake.DeltaTable(str(path))
    names = [field.name for field in table.schema().fields]
    pk = list(pk) or primary_key(table) or names
    wanted: list[tuple[int, int]] = []  # (version, batch)
    for commit in our_commits(table):
        batch = int(commit[BATCH_KEY])
        if position(batch, 1 << 31) <= after:
            break
        if change_count(commit.get("operationMetrics") or {}) and (
            upto is None or position(batch, 0) <= upto
        ):
            wanted.append((int(commit["version"]), batch))
    found: list[TableChange] = []
    for version, batch in reversed(wanted):
        feed = pa.table(table.load_cdf(starting_version=version, ending_version=version).read_all())
        kinds = feed.column("_change_type").to_pylist()
        values = list(column_rows(feed, names))
        key_index = [names.index(key) for key in pk]
        ordered = sorted(
            zip(kinds, values, strict=True),
            key=lambda item: (item[0] != "delete", tuple(item[1][i] for i in key_index), _KINDS[item[0]]),
        )
        for offset, (kind, row) in enumerate(ordered):
            pos = position(batch, offset)
            if pos <= after or (upto is not None and pos > upto):
                continue
            found.append(TableChange(pos, batch, _OPS[kind], tuple(row)))
            if len(found) >= limit:
                return found
    return found


def maintain(
    path: Path, *, target_size: int | None = None, retention_hours: int = DEFAULT_RETENTION_HOURS
) -> dict[str, Any]:
    """The documented maintenance of a Delta sink table: compact small files (``optimize``,
    ``compact``: one commit with ``dataChange=false``, readers and the change feed see no
    change), vacuum files removed longer than ``retention_hours`` ago (Delta's default
    retention is 7 days; a shorter one breaks readers pinned to older versions), then write a
    checkpoint (readers replay the log from it instead of every JSON commit). Returns the
    metrics. Run it between batches or beside a running job (delta-rs commits optimistically)."""
    import deltalake

    table = deltalake.DeltaTable(str(path))
    compacted: dict[str, Any] = table.optimize.compact(target_size=target_size)
    vacuumed = table.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False)
    table.create_checkpoint()  # a reader replays the log from here, not from version 0
    return {"optimize": compacted, "vacuumed_files": len(vacuumed)}


class DeltaKind(SinkKind):
    """``delta:///rel/dir`` and ``delta:////abs/dir``: a Delta table directory (the whole
    directory is the sink's table: its name is recorded, not used to find it)."""

    name = "delta"
    forms = ("delta:///…",)
    table_format = True
    location_is_table = True
    commit_note = "batch ids committed as Delta application transactions (txn) of the same commit"

    def claims(self, url: str) -> bool:
        return url.startswith("delta:")

    def resolve(self, url: str, base: Path) -> str:
        return absolute(PREFIX, delta_location(url, base))

    def local_path(self, url: str, base: Path | None = None) -> Path | None:
        return delta_location(url, base)

    def url_in(self, directory: Path, name: str) -> str:
        return absolute(PREFIX, directory / f"{name}-delta")

    def open(
        self, url: str, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> DeltaSink:
        try:
            path = delta_location(url)
        except SinkUrlError as error:
            raise SinkError(str(error)) from None
        return DeltaSink(path, table, columns, pk, changelog=changelog)

    def snapshot(self, url: str, table: str, pk: Sequence[str], limit: int | None = None) -> TableSnapshot:
        return guarded(f"the sink table {table}", url, lambda: read_snapshot(delta_location(url), pk, limit))

    def changes(
        self, url: str, table: str, after: int, limit: int, upto: int | None = None
    ) -> list[TableChange]:
        return guarded(
            f"the changes of {table}", url, lambda: read_changes(delta_location(url), [], after, limit, upto)
        )

    def drop(self, url: str, table: str) -> None:
        """The table directory removed (its log, data files and change feed)."""
        path = delta_location(url)
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            return
        except OSError as error:
            raise SinkError(f"cannot drop the Delta table {path}: {error}") from None

    def maintain(self, url: str, table: str, *, retention_hours: float | None = None) -> dict[str, Any]:
        """:func:`maintain` (``retention_hours``: None is Delta's default, 7 days)."""
        hours = DEFAULT_RETENTION_HOURS if retention_hours is None else int(retention_hours)
        return maintain(delta_location(url), retention_hours=hours)

    def scan(self, url: str, table: str) -> Any:
        import deltalake

        return deltalake.DeltaTable(str(delta_location(url))).to_pyarrow_table()

    def data_files(self, url: str, table: str) -> int | None:
        import deltalake

        return len(deltalake.DeltaTable(str(delta_location(url))).file_uris())
