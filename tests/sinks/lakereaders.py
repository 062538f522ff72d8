"""Independent readers of the lakehouse sinks' tables: pyarrow over the files the table's own log
or metadata lists, without deltalake or pyiceberg (the libraries that wrote them).

Delta: the ``_delta_log`` (the last checkpoint's Parquet if there is one, then every JSON commit
after it, in version order) replayed as add/remove actions; the live files read with pyarrow.
Iceberg: the SQL catalog's SQLite table ``iceberg_tables`` -> the table's metadata JSON -> the
current snapshot's manifest list (Avro, read with fastavro) -> its manifests -> the live data files
(position delete files applied; equality deletes are refused, the sink never writes them).
DuckDB's delta and iceberg extensions would be another independent reader, but DuckDB downloads
them at run time from its own site, which CI cannot reach (checked: ``INSTALL delta`` fails), so
the readers are built here from pyarrow and fastavro, packages the lakehouse extra installs.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import fastavro
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]


@dataclass
class DeltaLog:
    """What a replay of a Delta log found: live files, the txn versions by app id, and the batch
    ids of every commit that carries one (in commit order: a batch applied twice shows twice)."""

    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    txn: dict[str, int] = field(default_factory=dict)
    batches: list[int] = field(default_factory=list)
    version: int = -1


def _local(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def replay_delta(path: Path) -> DeltaLog:
    """Replay ``path``'s Delta log (checkpoint + JSON commits)."""
    log = path / "_delta_log"
    state = DeltaLog()
    start = -1
    last = log / "_last_checkpoint"
    if last.exists():
        checkpoint = json.loads(last.read_text())
        start = int(checkpoint["version"])
        assert "parts" not in checkpoint, "multi-part checkpoints are not read here"
        table = pq.read_table(log / f"{start:020d}.checkpoint.parquet")
        for action in table.to_pylist():
            if action.get("add"):
                state.files[action["add"]["path"]] = action["add"]
            if action.get("txn"):
                state.txn[action["txn"]["appId"]] = int(action["txn"]["version"])
        state.version = start
    commits = sorted(log.glob("*.json"), key=lambda item: int(item.stem))
    for commit in commits:
        version = int(commit.stem)
        if version <= start:
            continue
        for line in commit.read_text().splitlines():
            if not line.strip():
                continue
            action = json.loads(line)
            if "add" in action:
                state.files[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                state.files.pop(action["remove"]["path"], None)
            elif "txn" in action:
                state.txn[action["txn"]["appId"]] = int(action["txn"]["version"])
            elif "commitInfo" in action and "upsertmat.batch" in action["commitInfo"]:
                state.batches.append(int(action["commitInfo"]["upsertmat.batch"]))
        state.version = version
    return state


def delta_rows(path: Path) -> list[tuple[Any, ...]]:
    """The rows of the Delta table at ``path``, ordered by the first column."""
    state = replay_delta(path)
    tables = [pq.read_table(path / unquote(name)) for name in state.files]
    return _rows(tables)


def _rows(tables: list[Any]) -> list[tuple[Any, ...]]:
    if not tables:
        return []
    data = pa.concat_tables(tables)
    names = data.column_names
    rows = list(zip(*(data.column(name).to_pylist() for name in names), strict=True))
    return sorted(rows, key=lambda row: row[0])


@dataclass
class IcebergState:
    """The current snapshot of an Iceberg table as its metadata lists it."""

    snapshot: dict[str, Any] | None
    data_files: list[str]
    delete_files: list[tuple[int, str]]
    snapshots: list[dict[str, Any]]
    properties: dict[str, str]


def iceberg_state(warehouse: Path, table: str, namespace: str = "upsertmat") -> IcebergState:
    """Read the catalog row, the metadata JSON, the manifest list and the manifests."""
    with sqlite3.connect(warehouse / "catalog.db") as catalog:
        found = catalog.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
            (namespace, table),
        ).fetchone()
    assert found is not None, f"no table {namespace}.{table} in {warehouse}"
    metadata = json.loads(Path(_local(found[0])).read_text())
    current = metadata.get("current-snapshot-id")
    snapshots = metadata.get("snapshots", [])
    snapshot = next((item for item in snapshots if item["snapshot-id"] == current), None)
    data: list[str] = []
    deletes: list[tuple[int, str]] = []
    if snapshot is not None:
        with open(_local(snapshot["manifest-list"]), "rb") as handle:
            manifests: list[Any] = list(fastavro.reader(handle))
        for manifest in manifests:
            with open(_local(manifest["manifest_path"]), "rb") as handle:
                entries: list[Any] = list(fastavro.reader(handle))
                for entry in entries:
                    if entry["status"] == 2:  # DELETED
                        continue
                    item = entry["data_file"]
                    content = int(item.get("content", 0))
                    if content == 0:
                        data.append(item["file_path"])
                    else:
                        deletes.append((content, item["file_path"]))
    return IcebergState(snapshot, data, deletes, snapshots, metadata.get("properties", {}))


def iceberg_rows(warehouse: Path, table: str) -> list[tuple[Any, ...]]:
    """The rows of the Iceberg table's current snapshot, ordered by the first column."""
    state = iceberg_state(warehouse, table)
    positions: dict[str, set[int]] = {}
    for content, path in state.delete_files:
        assert content == 1, "equality delete files are not read here"
        for record in pq.read_table(_local(path)).to_pylist():
            positions.setdefault(record["file_path"], set()).add(int(record["pos"]))
    tables = []
    for path in state.data_files:
        data = pq.read_table(_local(path))
        dropped = positions.get(path)
        if dropped:
            keep = [index not in dropped for index in range(data.num_rows)]
            data = data.filter(pa.array(keep))
        tables.append(data)
    return _rows(tables)


def iceberg_commits(warehouse: Path, table: str, namespace: str = "upsertmat") -> list[list[int]]:
    """The batch ids each commit of the table added snapshots for, commit by commit: the metadata
    files of the table's metadata log, in order, compared snapshot set by snapshot set. A batch
    applied twice would show in two commits."""
    with sqlite3.connect(warehouse / "catalog.db") as catalog:
        found = catalog.execute(
            "SELECT metadata_location FROM iceberg_tables WHERE table_namespace = ? AND table_name = ?",
            (namespace, table),
        ).fetchone()
    assert found is not None
    current = json.loads(Path(_local(found[0])).read_text())
    files = [entry["metadata-file"] for entry in current.get("metadata-log", [])] + [found[0]]
    seen: set[int] = set()
    commits: list[list[int]] = []
    for file in files:
        metadata = json.loads(Path(_local(file)).read_text())
        added = [item for item in metadata.get("snapshots", []) if item["snapshot-id"] not in seen]
        seen.update(item["snapshot-id"] for item in added)
        batches = sorted(
            {
                int(item["summary"]["upsertmat.batch"])
                for item in added
                if "upsertmat.batch" in item.get("summary", {})
            }
        )
        if batches:
            commits.append(batches)
    return commits
