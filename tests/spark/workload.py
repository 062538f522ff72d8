"""A seeded out-of-order changelog for pipeline tests, and the table the model says it yields.

Rows ``(id, version, amount, flag, payload)`` with sink PK ``id``: every key is inserted, then
updated as ``-U old``/``+U new`` pairs, sometimes deleted and re-inserted; the pairs of one
update are sometimes delivered ``+U`` first (the classic out-of-order case of a shuffled join).
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

from upsertmat.spark.config import PipelineConfig
from upsertmat.spark.parts import Column, SinkSpec, SourceSpec, SparkOptions
from upsertmat.spark.sources.formats import source_format
from upsertmat.spec import Change, Keys, ModelMaterializer, RowKind
from upsertmat.spec.changes import Row

COLUMNS = ("id", "version", "amount", "flag", "payload")
SOURCE_COLUMNS = (
    Column("id", "long"),
    Column("version", "long"),
    Column("amount", "double"),
    Column("flag", "boolean"),
    Column("payload", "string"),
)
"""The row's columns with their types (the source's DDL: ``op``, ``seq``, then these)."""
KEYS = Keys(pk=(0,))
ONE_FILE = SparkOptions(max_files_per_trigger=1)
"""The tests' Spark options: one source file per micro-batch."""


def workload_config(
    source: Path,
    checkpoint: Path,
    sink_url: str,
    table: str = "sink",
    fmt: str = "jsonl",
    spark: SparkOptions = ONE_FILE,
) -> PipelineConfig:
    """The pipeline of this changelog: ``source``'s files (``fmt``), materialized by id into
    ``table`` of ``sink_url``, on ``spark`` (``dataclasses.replace`` changes the rest)."""
    return PipelineConfig(
        source=SourceSpec(source, source_format(fmt), SOURCE_COLUMNS),
        sink=SinkSpec(sink_url, table),
        primary_key=("id",),
        checkpoint=checkpoint,
        spark=spark,
    )


def changelog(seed: int, keys: int, updates: int) -> list[Change]:
    """The arrival-ordered changelog."""
    rng = random.Random(seed)
    current: dict[int, Row] = {}
    out: list[Change] = []
    for step in range(updates):
        key = rng.randrange(keys)
        row: Row = (key, step, round(rng.uniform(-100, 100), 2), rng.random() < 0.5, f"p{step}-é")
        old = current.get(key)
        if old is None:
            out.append(Change(RowKind.INSERT, row))
            current[key] = row
        elif rng.random() < 0.1:
            out.append(Change(RowKind.DELETE, old))
            del current[key]
        else:
            pair = [Change(RowKind.UPDATE_BEFORE, old), Change(RowKind.UPDATE_AFTER, row)]
            out.extend(reversed(pair) if rng.random() < 0.3 else pair)
            current[key] = row
    return out


def model_table(changes: list[Change]) -> dict[Any, Row]:
    """The sink table (PK -> row) after applying the model's outputs."""
    model = ModelMaterializer(KEYS)
    table: dict[Any, Row] = {}
    for change in changes:
        emitted = model.process(change)
        if emitted is None:
            continue
        if emitted.kind.is_add:
            table[emitted.row[0]] = emitted.row
        else:
            table.pop(emitted.row[0], None)
    return table


def raw_table(changes: list[Change]) -> dict[Any, Row]:
    """The sink table when the raw changelog is applied (no materializer)."""
    table: dict[Any, Row] = {}
    for change in changes:
        if change.kind.is_add:
            table[change.row[0]] = change.row
        else:
            table.pop(change.row[0], None)
    return table


def records(changes: list[Change]) -> list[dict[str, Any]]:
    """The changelog as source records (``seq`` = arrival index)."""
    return [
        {"seq": seq, "op": change.kind.value, **dict(zip(COLUMNS, change.row, strict=True))}
        for seq, change in enumerate(changes)
    ]


def write_files(directory: Path, rows: list[dict[str, Any]], files: int, fmt: str = "json") -> None:
    """``files`` files of consecutive records, modification times 1 s apart, lines reversed."""
    import os
    import time

    directory.mkdir(parents=True, exist_ok=True)
    start = time.time() - files - 10
    size = -(-len(rows) // files)
    for number in range(files):
        chunk = list(reversed(rows[number * size : (number + 1) * size]))
        staged = directory.parent / f"part{number:04d}.tmp"
        if fmt == "json":
            staged.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in chunk))
        elif fmt == "parquet":
            import pyarrow as pa  # type: ignore[import-untyped]
            import pyarrow.parquet as pq  # type: ignore[import-untyped]

            pq.write_table(pa.Table.from_pylist(chunk), staged)
        else:
            with staged.open("w", newline="") as handle:
                # by position, in the order of the source's DDL (SourceSpec.ddl)
                writer = csv.DictWriter(handle, fieldnames=["op", "seq", *COLUMNS])
                writer.writeheader()
                writer.writerows(chunk)
        os.utime(staged, (start + number, start + number))
        staged.rename(directory / f"part{number:04d}.{fmt}")


def normalized(rows: list[Row] | dict[Any, Row]) -> list[tuple[Any, ...]]:
    """Rows ordered by PK (an integer) with booleans as 0/1 (SQLite stores BOOLEAN as an integer)."""
    values = rows.values() if isinstance(rows, dict) else rows
    plain: list[tuple[Any, ...]] = [
        tuple(int(v) if isinstance(v, bool) else v for v in row) for row in values
    ]
    return sorted(plain, key=lambda row: int(row[0]))
