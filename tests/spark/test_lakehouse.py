"""The Delta Lake, Iceberg and Paimon sinks: a pipeline into each equals the model, read back by
the library's own reader, by the results module (pinned version / snapshot, changelog) and by an
independent reader over the files the table's log, metadata or snapshot lists
(tests/sinks/lakereaders.py, tests/sinks/paimon_reader.py); a replayed batch is a no-op;
maintenance keeps the table and its exactly-once record."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from upsertmat.sinks import Column, last_batch, open_sink, read_changes, read_snapshot
from upsertmat.sinks import delta as delta_sink
from upsertmat.sinks import iceberg as iceberg_sink
from upsertmat.sinks import paimon as paimon_sink
from upsertmat.spark.pipeline import read_table, run_pipeline

from ..sinks.lakereaders import delta_rows, iceberg_rows, iceberg_state, replay_delta
from ..sinks.paimon_reader import paimon_batches, paimon_rows
from ..sinks.paimon_reader import state as paimon_state
from .workload import ONE_FILE, changelog, model_table, normalized, records, workload_config, write_files

pytestmark = [pytest.mark.spark]

FILES = 4


def sink_url(kind: str, tmp_path: Path) -> str:
    return f"delta:///{tmp_path / 'table'}" if kind == "delta" else f"{kind}:///{tmp_path / 'warehouse'}"


def independent_rows(kind: str, tmp_path: Path, table: str) -> list[tuple[Any, ...]]:
    if kind == "delta":
        return delta_rows(tmp_path / "table")
    if kind == "paimon":
        return paimon_rows(tmp_path / "warehouse", table)
    return iceberg_rows(tmp_path / "warehouse", table)


@pytest.mark.parametrize("kind", ["delta", "iceberg", "paimon"])
def test_pipeline_into_a_lakehouse_table(spark: SparkSession, tmp_path: Path, kind: str) -> None:
    changes = changelog(seed=5, keys=30, updates=300)
    write_files(tmp_path / "in", records(changes), files=FILES)
    bucketed = replace(ONE_FILE, key_buckets=8)
    url = sink_url(kind, tmp_path)
    config = workload_config(tmp_path / "in", tmp_path / "checkpoint", url, "orders", spark=bucketed)
    config = replace(config, changelog=True)
    result = run_pipeline(config, spark)
    assert [batch.batch_id for batch in result.batches] == list(range(FILES))
    expected = normalized(model_table(changes))
    assert normalized(read_table(config, spark)) == expected
    assert normalized(independent_rows(kind, tmp_path, "orders")) == expected

    # the results module: a pinned snapshot and the changelog, which replays to the table
    snapshot = read_snapshot(config.sink.url, "orders", ["id"])
    assert snapshot.batch_id == FILES - 1 == last_batch(config.sink.url, "orders")
    assert normalized(list(snapshot.rows)) == expected and snapshot.total == len(expected)
    replayed: dict[Any, tuple[Any, ...]] = {}
    found = read_changes(config.sink.url, "orders", 0, 100_000)
    assert [change.pos for change in found] == sorted({change.pos for change in found})
    assert found[-1].pos == snapshot.changes_pos
    for change in found:
        if change.op in ("+I", "+U"):
            replayed[change.row[0]] = change.row
        else:
            assert replayed.pop(change.row[0]) == change.row  # a retraction names the row it removes
    assert normalized(replayed) == expected
    page = read_changes(config.sink.url, "orders", found[9].pos, 5)
    assert page == found[10:15]

    # every batch is recorded once, and a replayed batch is a no-op
    query = result.query_id
    if kind == "delta":
        log = replay_delta(tmp_path / "table")
        assert log.batches == list(range(FILES)) and log.txn[query] == FILES - 1
    elif kind == "paimon":
        assert paimon_batches(tmp_path / "warehouse", "orders") == list(range(FILES))
        last = paimon_state(tmp_path / "warehouse", "orders")
        assert last is not None and last.snapshot["commitUser"] == paimon_sink.commit_user(query)
        assert last.snapshot["commitIdentifier"] == FILES - 1
    else:
        state = iceberg_state(tmp_path / "warehouse", "orders")
        assert state.properties[iceberg_sink.property_key(query)] == str(FILES - 1)
        assert not state.delete_files  # copy-on-write: no delete files to merge on read
    columns = [Column("id", "bigint"), Column("version", "bigint"), Column("amount", "double"),
               Column("flag", "boolean"), Column("payload", "string")]  # fmt: skip
    sink = open_sink(config.sink.url, "orders", columns, (0,))
    assert sink.apply_batch(query, FILES - 1, [("-D", (0, 0, 0.0, False, "x"))]).skipped
    assert sink.committed_batches() == FILES
    sink.close()

    # maintenance compacts and keeps both the table and the exactly-once record
    if kind == "delta":
        delta_sink.maintain(tmp_path / "table", retention_hours=0)
        assert replay_delta(tmp_path / "table").txn[query] == FILES - 1
    elif kind == "paimon":
        paimon_sink.maintain(tmp_path / "warehouse", "orders")
        rewritten = paimon_state(tmp_path / "warehouse", "orders")
        assert rewritten is not None and rewritten.snapshot["commitKind"] == "OVERWRITE"
        assert len(rewritten.files) <= paimon_sink.DEFAULT_BUCKETS  # one file per bucket
        assert read_changes(config.sink.url, "orders", 0, 100_000) == found  # the changes stay
    else:
        iceberg_sink.maintain(config.sink.url, "orders")
        assert len(iceberg_state(tmp_path / "warehouse", "orders").data_files) == 1
    assert normalized(independent_rows(kind, tmp_path, "orders")) == expected
    sink = open_sink(config.sink.url, "orders", columns, (0,))
    assert sink.apply_batch(query, FILES - 1, [("-D", (0, 0, 0.0, False, "x"))]).skipped
    sink.close()
    assert read_snapshot(config.sink.url, "orders", ["id"]).batch_id == FILES - 1
