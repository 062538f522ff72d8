"""The Delta Lake sink: each micro-batch one MERGE, committed exactly once through Delta's
application transactions (``deltalake``, delta-rs: no JVM jars).

A batch's net table changes (the last change of each primary key: upserts and deletes,
:func:`~.sink.last_per_key`) are MERGEd by the primary key in ONE commit that also carries the
application transaction ``txn {appId: <query id>, version: <batch id>}`` and, in its commit
info, ``upsertmat.batch`` / ``upsertmat.query``. Before a batch is applied the table's latest
``txn`` version of the query is read back: a batch id at or below it was committed (Spark re-runs
only the batch whose commit did not reach its checkpoint, with the same id), so the batch is
skipped. A commit either happened whole (data files, txn and commit info are one log entry
written atomically) or not at all, so a SIGKILL at any moment leaves either state.

The MERGE deletes matched keys of ``-U``/``-D``, updates matched keys whose row differs
(``IS DISTINCT FROM`` on the other columns, so an unchanged row is not rewritten and makes no
change record), inserts the rest. delta-rs merges copy-on-write: the data files holding matched
rows are rewritten; :func:`maintain` compacts small files and vacuums removed ones (docs/spark.md).

``changelog=True`` turns on the table's change data feed (``delta.enableChangeDataFeed``): the
committed changes are read from it (:func:`read_changes`). A change's position is
``batch_id << 32 | (index + 1)`` (:func:`position`): increasing along the changelog, stable,
not dense. An empty batch commits nothing. Miss explanations are counted in the progress, not
stored (no side table in a lakehouse sink).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..spec.changes import Row
from .sink import BatchOutcome, BatchSink, Column, SinkError, last_per_key

BATCH_KEY = "upsertmat.batch"
QUERY_KEY = "upsertmat.query"
OP = "_upsertmat_op"
CDF = "delta.enableChangeDataFeed"
DESCRIPTION = "upsertmat sink; primary key: "
"""The table's description names its primary key (Delta has no primary keys; the change feed is
ordered by it)."""
ARROW_TYPES = {"bigint": "int64", "int": "int64", "double": "float64", "boolean": "bool", "string": "string"}


def arrow_schema(columns: Sequence[Column]) -> Any:
    """The table's pyarrow schema (integers as 64 bits, as the SQL sinks store them)."""
    import pyarrow as pa  # type: ignore[import-untyped]

    fields = []
    for column in columns:
        if column.spark_type not in ARROW_TYPES:
            raise SinkError(
                f"column {column.name!r} has type {column.spark_type}; "
                f"the sink supports {sorted(ARROW_TYPES)}"
            )
        fields.append(pa.field(column.name, pa.type_for_alias(ARROW_TYPES[column.spark_type])))
    return pa.schema(fields)


def _quote(name: str) -> str:
    """A SQL identifier for delta-rs's predicates (DataFusion: double quotes)."""
    return '"' + name.replace('"', '""') + '"'


class DeltaSink(BatchSink):
    """A Delta table at ``path`` keyed by ``pk`` (created if missing). See the module docstring."""

    def __init__(
        self, path: Path, table: str, columns: Sequence[Column], pk: Sequence[int], *, changelog: bool = False
    ) -> None:
        try:
            import deltalake
        except ImportError:
            raise SinkError(
                "the Delta Lake sink needs deltalake: pip install 'upsertmat[lakehouse]'"
            ) from None
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
        keys = [names[index] for index in self.pk]
        self.keys = keys
        others = [name for index, name in enumerate(names) if index not in self.pk]
        self.predicate = " AND ".join(f"t.{_quote(key)} = s.{_quote(key)}" for key in keys)
        self.others = others
        self.names = names
        self.differs = " OR ".join(f"(t.{_quote(name)} IS DISTINCT FROM s.{_quote(name)})" for name in others)
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
        found = [(field.name, str(field.type)) for field in table.schema().fields]
        if [name for name, _ in found] != self.names:
            raise SinkError(
                f"{self.where} has columns {[name for name, _ in found]}, the job writes {self.names}: "
                "use another table path"
            )
        if self.changelog and table.metadata().configuration.get(CDF) != "true":
            table.alter.set_table_properties({CDF: "true"})

    def _table(self) -> Any:
        return self.deltalake.DeltaTable(str(self.path))

    def apply_batch(
        self,
        query_id: str,
        batch_id: int,
        changes: Sequence[tuple[str, Row]],
        misses: Sequence[tuple[int, str]] = (),
    ) -> BatchOutcome:
        """MERGE the batch's last change per key with ``txn (query_id, batch_id)``; skip a batch the
        table's txn already holds. SinkFailure (nothing applied) if delta-rs fails."""
        upserts, deletes = last_per_key(changes, self.pk)
        try:
            table = self._table()
            done = table.transaction_version(query_id)
            if done is not None and done >= batch_id:
                return BatchOutcome(0, 0, skipped=True)
            if not upserts and not deletes:
                return BatchOutcome(0, 0, skipped=False)
            metadata = {BATCH_KEY: str(batch_id), QUERY_KEY: query_id}
            self._merge(table, query_id, batch_id, upserts, deletes, metadata)
        except SinkError:
            raise
        except Exception as error:
            raise self.failure(batch_id, error, "free space") from error
        return BatchOutcome(len(upserts), len(deletes), skipped=False)

    def _merge(
        self,
        table: Any,
        query_id: str,
        batch_id: int,
        upserts: list[Row],
        deletes: list[Row],
        metadata: dict[str, str],
    ) -> dict[str, Any]:
        import pyarrow as pa

        names, pk = self.names, self.pk
        columns: list[list[Any]] = [[] for _ in names]
        for row in upserts:
            for index, value in enumerate(row):
                columns[index].append(value)
        for key in deletes:
            for index in range(len(names)):
                columns[index].append(key[pk.index(index)] if index in pk else None)
        arrays = [
            pa.array(values, type=field.type) for values, field in zip(columns, self.schema, strict=True)
        ]
        ops = pa.array(["U"] * len(upserts) + ["D"] * len(deletes), type=pa.string())
        source = pa.Table.from_arrays([*arrays, ops], names=[*names, OP])
        deltalake = self.deltalake
        properties = deltalake.CommitProperties(
            app_transactions=[deltalake.Transaction(app_id=query_id, version=batch_id)],
            custom_metadata=metadata,
        )
        merger = table.merge(
            source, self.predicate, source_alias="s", target_alias="t", commit_properties=properties
        )
        merger = merger.when_matched_delete(predicate=f"s.{OP} = 'D'")
        if self.others:
            merger = merger.when_matched_update(
                updates={_quote(name): f"s.{_quote(name)}" for name in self.others},
                predicate=f"s.{OP} = 'U' AND ({self.differs})",
            )
        merger = merger.when_not_matched_insert(
            updates={_quote(name): f"s.{_quote(name)}" for name in names}, predicate=f"s.{OP} = 'U'"
        )
        result: dict[str, Any] = merger.execute()
        return result

    def rows(self) -> list[Row]:
        return table_rows(self._table(), self.names, [self.names[index] for index in self.pk])

    def committed_batches(self) -> int:
        return sum(1 for _ in our_commits(self._table()))

    def close(self) -> None:
        pass


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


def position(batch_id: int, index: int) -> int:
    """The changelog position of the ``index``-th (0-based) change of batch ``batch_id`` in a
    lakehouse sink: increasing along the changelog, stable, not dense."""
    return (batch_id << 32) + index + 1


def changes_end(table: Any) -> int:
    """The position of the last change recorded (0: none)."""
    for commit in our_commits(table):
        count = change_count(commit.get("operationMetrics") or {})
        if count:
            return position(int(commit[BATCH_KEY]), count - 1)
    return 0


def table_rows(table: Any, names: Sequence[str], keys: Sequence[str], limit: int | None = None) -> list[Row]:
    """The rows of a (version-pinned) table, ordered by ``keys``, at most ``limit``."""
    import pyarrow as pa

    data = pa.table(table.to_pyarrow_table()).select(list(names))
    if keys:
        data = data.sort_by([(key, "ascending") for key in keys])
    if limit is not None:
        data = data.slice(0, limit)
    return [tuple(row) for row in zip(*(data.column(name).to_pylist() for name in names), strict=True)]


@dataclass(frozen=True)
class DeltaSnapshot:
    """A Delta table pinned to one version: the batch its newest batch commit holds (None: none),
    its columns, rows (ordered by key, at most the limit), row count and changelog position."""

    version: int
    batch_id: int | None
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    total: int
    changes_pos: int


def primary_key(table: Any) -> list[str]:
    """The primary key columns the table's description names ([] if it names none)."""
    description = table.metadata().description or ""
    if not description.startswith(DESCRIPTION):
        return []
    return [name for name in description[len(DESCRIPTION) :].split(",") if name]


def read_snapshot(path: Path, pk: Sequence[str], limit: int | None = None) -> DeltaSnapshot | None:
    """The table at its current version, read whole from that one pinned version (None: no
    table yet). O(rows)."""
    import deltalake

    if not deltalake.DeltaTable.is_deltatable(str(path)):
        return None
    table = deltalake.DeltaTable(str(path))
    names = [field.name for field in table.schema().fields]
    pk = list(pk) or primary_key(table)
    batch = next((int(commit[BATCH_KEY]) for commit in our_commits(table)), None)
    rows = table_rows(table, names, pk)
    return DeltaSnapshot(
        version=table.version(),
        batch_id=batch,
        columns=tuple(names),
        rows=tuple(rows if limit is None else rows[:limit]),
        total=len(rows),
        changes_pos=changes_end(table),
    )


_KINDS = {"delete": 0, "update_preimage": 1, "update_postimage": 2, "insert": 3}
_OPS = {"delete": "-D", "update_preimage": "-U", "update_postimage": "+U", "insert": "+I"}


def read_changes(
    path: Path, pk: Sequence[str], after: int, limit: int, upto: int | None = None
) -> list[tuple[int, int, str, Row]]:
    """The committed changes ``(pos, batch, op, row)`` at positions ``after < pos [<= upto]``, at
    most ``limit``, from the change data feed of each batch commit that holds such positions.
    Within a commit: the deletes by key, then per key ``+I`` or ``-U``/``+U`` (a fixed order, so
    positions are stable). O(history) to find the commits, O(their changes) to read them.
    ``pk``: the primary key columns ([]: the ones the table's description names)."""
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
    found: list[tuple[int, int, str, Row]] = []
    for version, batch in reversed(wanted):
        feed = pa.table(table.load_cdf(starting_version=version, ending_version=version).read_all())
        kinds = feed.column("_change_type").to_pylist()
        values = list(zip(*(feed.column(name).to_pylist() for name in names), strict=True))
        key_index = [names.index(key) for key in pk]
        ordered = sorted(
            zip(kinds, values, strict=True),
            key=lambda item: (item[0] != "delete", tuple(item[1][i] for i in key_index), _KINDS[item[0]]),
        )
        for offset, (kind, row) in enumerate(ordered):
            pos = position(batch, offset)
            if pos <= after or (upto is not None and pos > upto):
                continue
            found.append((pos, batch, _OPS[kind], tuple(row)))
            if len(found) >= limit:
                return found
    return found


def maintain(path: Path, *, target_size: int | None = None, retention_hours: int = 168) -> dict[str, Any]:
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
