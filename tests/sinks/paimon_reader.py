"""An independent reader of the Paimon sink's tables: Paimon's own file format read without
pypaimon (the library that wrote them).

A table of a filesystem catalog is the directory ``<warehouse>/<database>.db/<table>``: its newest
snapshot is the greatest ``snapshot/snapshot-<id>`` (the ``LATEST`` hint is not trusted), a JSON
document naming the table's schema (``schema/schema-<id>``, JSON) and two manifest lists (Avro,
read with fastavro): the base and the delta. Each lists manifests (Avro) whose entries add
(``_KIND`` 0) or delete (1) a data file of a bucket; the entries replayed in order leave the live
files (``bucket-<n>/<file>``, Parquet or ORC, read with pyarrow), and their rows merged by primary
key, the row of the highest ``_SEQUENCE_NUMBER`` winning and a ``-U``/``-D`` (``_VALUE_KIND`` 1, 3)
removing its key, are the table. The merge is a Python dict, small and obviously right: the test
tables are small.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.orc as orc  # type: ignore[import-untyped]
import pyarrow.parquet as pq  # type: ignore[import-untyped]

SNAPSHOT = re.compile(r"^snapshot-(\d+)$")


def table_dir(warehouse: Path, table: str, database: str = "upsertmat") -> Path:
    """Where the filesystem catalog keeps ``database.table``."""
    return warehouse / f"{database}.db" / table


def snapshots(warehouse: Path, table: str) -> list[dict[str, Any]]:
    """Every snapshot JSON of the table, by id."""
    directory = table_dir(warehouse, table) / "snapshot"
    if not directory.is_dir():
        return []
    found = sorted(
        (int(match.group(1)), path)
        for path in directory.iterdir()
        if (match := SNAPSHOT.match(path.name)) is not None
    )
    return [json.loads(path.read_text()) for _, path in found]


def _avro(path: Path) -> list[dict[str, Any]]:
    with open(path, "rb") as handle:
        return [dict(record) for record in fastavro.reader(handle)]  # type: ignore[arg-type]


@dataclass
class PaimonState:
    """A snapshot as its files say: the schema, the live data files (bucket, name, level) and
    the snapshot JSON."""

    snapshot: dict[str, Any]
    schema: dict[str, Any]
    files: list[tuple[int, str, int]]
    retractions: dict[str, int | None]
    """Per live file, the ``-U``/``-D`` rows its manifest entry counts (``_DELETE_ROW_COUNT``): a
    reader reads a file said to hold none without merging it."""


def state(warehouse: Path, table: str, snapshot_id: int | None = None) -> PaimonState | None:
    """The table at ``snapshot_id`` (None: the newest), or None when it has no snapshot."""
    every = snapshots(warehouse, table)
    if not every:
        return None
    snapshot = every[-1] if snapshot_id is None else next(s for s in every if s["id"] == snapshot_id)
    root = table_dir(warehouse, table)
    schema = json.loads((root / "schema" / f"schema-{snapshot['schemaId']}").read_text())
    live: dict[tuple[bytes, int, str], tuple[int, str, int]] = {}
    counts: dict[str, int | None] = {}
    for listing in (snapshot["baseManifestList"], snapshot["deltaManifestList"]):
        for manifest in _avro(root / "manifest" / listing):
            for entry in _avro(root / "manifest" / manifest["_FILE_NAME"]):
                file = entry["_FILE"]
                assert not file.get("_EXTERNAL_PATH"), "external data paths are not read here"
                identity = (entry["_PARTITION"], entry["_BUCKET"], file["_FILE_NAME"])
                if entry["_KIND"] == 0:
                    live[identity] = (entry["_BUCKET"], file["_FILE_NAME"], file["_LEVEL"])
                    counts[file["_FILE_NAME"]] = file.get("_DELETE_ROW_COUNT")
                else:
                    live.pop(identity, None)
    assert not snapshot.get("indexManifest"), "deletion vectors and indexes are not read here"
    files = list(live.values())
    return PaimonState(snapshot, schema, files, {name: counts[name] for _, name, _ in files})


def _read(path: Path) -> list[dict[str, Any]]:
    data = orc.read_table(path) if path.suffix == ".orc" else pq.read_table(path)
    rows: list[dict[str, Any]] = data.to_pylist()
    return rows


def _identity(value: Any) -> Any:
    """Paimon compares keys by their bytes: -0.0 and 0.0 are two keys."""
    return (value, math.copysign(1.0, value)) if isinstance(value, float) else value


def paimon_rows(warehouse: Path, table: str, snapshot_id: int | None = None) -> list[tuple[Any, ...]]:
    """The rows of the table at ``snapshot_id`` (None: the newest), its own columns without the
    row-kind column, ordered by the first column."""
    found = state(warehouse, table, snapshot_id)
    if found is None:
        return []
    root = table_dir(warehouse, table)
    keys = found.schema["primaryKeys"]
    hidden = found.schema["options"].get("rowkind.field")
    names = [field["name"] for field in found.schema["fields"] if field["name"] != hidden]
    newest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for bucket, name, _level in found.files:
        rows = _read(root / f"bucket-{bucket}" / name)
        retracted = sum(1 for row in rows if row["_VALUE_KIND"] in (1, 3))
        assert found.retractions[name] in (None, retracted), (
            f"{name}: _DELETE_ROW_COUNT is not its -U/-D rows"
        )
        for row in rows:
            key = tuple(_identity(row[column]) for column in keys)
            held = newest.get(key)
            assert held is None or held["_SEQUENCE_NUMBER"] != row["_SEQUENCE_NUMBER"], (
                "one sequence number twice"
            )
            if held is None or row["_SEQUENCE_NUMBER"] > held["_SEQUENCE_NUMBER"]:
                newest[key] = row
    live = [
        tuple(row[column] for column in names) for row in newest.values() if row["_VALUE_KIND"] not in (1, 3)
    ]
    return sorted(live, key=lambda row: row[0])


def paimon_commits(warehouse: Path, table: str) -> list[tuple[str, int, str, dict[str, str]]]:
    """(commit user, commit identifier, commit kind, properties) of every snapshot, in order."""
    return [
        (s["commitUser"], int(s["commitIdentifier"]), s["commitKind"], dict(s.get("properties") or {}))
        for s in snapshots(warehouse, table)
    ]


def paimon_batches(warehouse: Path, table: str) -> list[int]:
    """The batch ids committed, one per batch commit in commit order (a batch applied twice
    shows twice): the APPEND snapshots of a commit user ``upsertmat-<query id>``, each of whose
    commit identifier is the batch id its properties name."""
    found = []
    for user, identifier, kind, properties in paimon_commits(warehouse, table):
        if user.startswith("upsertmat-") and "upsertmat.maintenance" not in properties:
            assert kind == "APPEND" and properties["upsertmat.batch"] == str(identifier)
            assert user == "upsertmat-" + properties["upsertmat.query"]
            found.append(identifier)
    return found
