"""End to end: changelog files -> Spark -> SQLite, with and without the materializer."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from upsertmat.impls.settings import ConflictBehavior, Settings, Strategy, TtlSettings
from upsertmat.spark import BatchProgress, PipelineConfig, PipelineConfigError
from upsertmat.spark.config import PIPELINE_SETTINGS
from upsertmat.spark.packing import packable
from upsertmat.spark.parts import SparkOptions
from upsertmat.spark.pipeline import column_types, read_table, run_pipeline
from upsertmat.spark.session import CHECKPOINT_MANAGER_CONF
from upsertmat.spec import Change, ModelMaterializer, RowKind
from upsertmat.spec.changes import Row

from .workload import (
    KEYS,
    ONE_FILE,
    changelog,
    model_table,
    normalized,
    raw_table,
    records,
    workload_config,
    write_files,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def config_for(tmp_path: Path, fmt: str = "jsonl", **overrides: Any) -> PipelineConfig:
    base = workload_config(
        tmp_path / "in", tmp_path / "checkpoint", f"sqlite:///{tmp_path / 'sink.db'}", fmt=fmt
    )
    return replace(base, **overrides)


def with_strategy(strategy: Strategy, **settings: Any) -> Settings:
    """The pipeline's default settings with ``strategy`` (and more ``settings``)."""
    return replace(PIPELINE_SETTINGS, strategy=strategy, **settings)


def buckets(count: int | None, **spark: Any) -> SparkOptions:
    """The tests' Spark options with ``count`` key buckets (and more ``spark`` options)."""
    return replace(ONE_FILE, key_buckets=count, **spark)


def test_packed_bucketed_rows_keep_nulls_booleans_floats_and_text_exact(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Key buckets over msgpack-exact columns ship a bucket's changes packed (mapInArrow):
    nulls, booleans, doubles (1.0 stays a float), non-ASCII text and integers come back with
    their types; the table equals the model's."""
    # Null some payloads, the same way on every copy of a row.
    changes = [
        Change(c.kind, (*c.row[:4], None if c.row[1] % 3 == 0 else c.row[4]))  # type: ignore[operator]
        for c in changelog(seed=13, keys=25, updates=250)
    ]
    names = ("id", "version", "amount", "flag", "payload")
    rows = [
        {"seq": seq, "op": c.kind.value, **dict(zip(names, c.row, strict=True))}
        for seq, c in enumerate(changes)
    ]
    write_files(tmp_path / "in", rows, files=2)
    config = config_for(tmp_path, spark=buckets(4), settings=with_strategy(Strategy.VALUE))
    schema = config.source.ddl()
    source = spark.read.schema(schema).json(str(tmp_path / "in"))
    assert packable(column_types(source), ["seq", "op", *names])
    assert not packable({"when": "timestamp"}, ["when"])
    run_pipeline(config, spark)
    assert any(row[4] is None for row in model_table(changes).values())
    assert normalized(read_table(config, spark)) == normalized(model_table(changes))


@pytest.mark.parametrize(
    ("fmt", "strategy", "count"),
    [
        ("json", Strategy.VALUE, None),
        ("parquet", Strategy.MAP, 3),
        ("csv", Strategy.LEGACY, None),
        ("json", Strategy.ADAPTIVE, 2),
    ],
)
def test_materialized_table_equals_the_model(
    spark: SparkSession, tmp_path: Path, fmt: str, strategy: Strategy, count: int | None
) -> None:
    """Bucketed grouping (many sink keys per Spark grouping key) gives the same table."""
    changes = changelog(seed=3, keys=20, updates=200)
    write_files(tmp_path / "in", records(changes), files=3, fmt=fmt)
    seen: list[BatchProgress] = []
    config = config_for(
        tmp_path,
        fmt,
        settings=with_strategy(strategy, threshold_high=4, threshold_low=2),
        progress=seen.append,
        spark=buckets(count),
    )
    result = run_pipeline(config, spark)
    assert [batch.batch_id for batch in seen] == [0, 1, 2]
    assert result.input_rows == len(changes)
    assert not any(batch.skipped for batch in seen)
    assert normalized(read_table(config, spark)) == normalized(model_table(changes))
    # Spark's report of every batch: where its time went
    assert [timing.batch_id for timing in result.timings] == [0, 1, 2]
    assert sum(timing.input_rows for timing in result.timings) == len(changes)
    for timing in result.timings:
        assert timing.total_ms >= timing.durations_ms["addBatch"] > 0
        assert timing.outside_add_batch_ms == timing.total_ms - timing.durations_ms["addBatch"]


def test_without_the_materializer_the_raw_changelog_is_applied(spark: SparkSession, tmp_path: Path) -> None:
    changes = changelog(seed=5, keys=10, updates=150)
    write_files(tmp_path / "in", records(changes), files=2)
    config = config_for(tmp_path, materialize=False)
    run_pipeline(config, spark)
    table = normalized(read_table(config, spark))
    assert table == normalized(raw_table(changes))
    assert table != normalized(model_table(changes))  # the classic wrong result: rows lost


def test_restart_on_the_checkpoint_continues_and_new_files_are_picked_up(
    spark: SparkSession, tmp_path: Path
) -> None:
    changes = changelog(seed=7, keys=15, updates=180)
    rows = records(changes)
    half = len(rows) // 2
    write_files(tmp_path / "in", rows[:half], files=2)
    config = config_for(tmp_path)
    first = run_pipeline(config, spark)
    assert normalized(read_table(config, spark)) == normalized(model_table(changes[:half]))
    arrive_later(tmp_path, rows[half:], files=2)
    second = run_pipeline(config, spark)
    assert [b.batch_id for b in first.batches] == [0, 1]
    assert [b.batch_id for b in second.batches] == [2, 3]
    assert second.query_id == first.query_id
    assert normalized(read_table(config, spark)) == normalized(model_table(changes))


def test_key_columns_not_in_the_row_fail_before_starting(tmp_path: Path) -> None:
    # What needs no Spark is refused when the config is made (tests/jobs/test_job_files.py).
    with pytest.raises(PipelineConfigError, match="key column 'nope' is not one of the row columns"):
        config_for(tmp_path, primary_key=("nope",))
    with pytest.raises(PipelineConfigError, match="key column 'nope' is not one of the row columns"):
        config_for(tmp_path, upsert_key=("nope",))


def test_config_round_trips_through_json(tmp_path: Path) -> None:
    config = config_for(
        tmp_path,
        "parquet",
        upsert_key=("version",),
        settings=with_strategy(Strategy.MAP, ttl=TtlSettings(ttl_ms=5)),
        spark=buckets(4, conf={"spark.executor.memory": "1g"}),
        conflict=ConflictBehavior.NOTHING,
        source=replace(workload_config(tmp_path, tmp_path, "s.db").source, ts_column="ts"),
    )
    assert PipelineConfig.from_json(config.to_json()) == config
    with pytest.raises(PipelineConfigError, match="unknown PipelineConfig fields"):
        PipelineConfig.from_json('{"sourcee": "x"}')
    with pytest.raises(PipelineConfigError, match="unknown SinkSpec fields"):
        PipelineConfig.from_json(config.to_json().replace('"table"', '"tabel"'))


@pytest.mark.parametrize(
    ("strategy", "count"), [(Strategy.VALUE, 3), (Strategy.MAP, None), (Strategy.LEGACY, 2)]
)
def test_processing_time_ttl_expires_state_between_runs(
    spark: SparkSession, tmp_path: Path, strategy: Strategy, count: int | None
) -> None:
    """Run 1 inserts; after more than the TTL, run 2 retracts (rule 7: ignored) and re-inserts
    (+I, not +U); the model with the clock advanced past the TTL agrees."""
    ttl = 2500
    first = [Change(RowKind.INSERT, (key, 1, 0.5, True, "a")) for key in range(5)]
    second = [
        Change(RowKind.DELETE, (0, 1, 0.5, True, "a")),
        Change(RowKind.INSERT, (1, 2, 1.5, False, "b")),
        Change(RowKind.UPDATE_AFTER, (2, 2, 2.5, False, "c")),
    ]
    rows = records([*first, *second])
    write_files(tmp_path / "in", rows[: len(first)], files=1)
    config = config_for(
        tmp_path, settings=with_strategy(strategy, ttl=TtlSettings(ttl_ms=ttl)), spark=buckets(count)
    )
    run_pipeline(config, spark)
    time.sleep(ttl / 1000 + 1)
    arrive_later(tmp_path, rows[len(first) :], files=1)
    result = run_pipeline(config, spark)
    assert [(b.changes, b.upserts, b.deletes) for b in result.batches] == [(2, 2, 0)]
    model = ModelMaterializer(KEYS, TtlSettings(ttl_ms=ttl))
    model.advance_time(1)
    table: dict[object, Row] = {}
    for change in first:
        emitted = model.process(change)
        assert emitted is not None
        table[emitted.row[0]] = emitted.row
    model.advance_time(1 + ttl + 1)
    outputs = [model.process(change) for change in second]
    assert outputs == [None, Change(RowKind.INSERT, second[1].row), Change(RowKind.INSERT, second[2].row)]
    for output in outputs:
        if output is not None:
            table[output.row[0]] = output.row
    assert normalized(read_table(config, spark)) == normalized(table)


def test_a_checkpoint_written_through_sparks_default_file_manager_continues(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Earlier builds wrote checkpoints through Spark's default checkpoint file manager (FileContext);
    # build_session now makes Spark rename through the FileSystem API. Same files either way.
    ours = spark.conf.get(CHECKPOINT_MANAGER_CONF)
    assert ours is not None and "FileSystemBased" in ours
    changes = changelog(seed=11, keys=40, updates=400)
    rows = records(changes)
    half = len(rows) // 2
    write_files(tmp_path / "in", rows[:half], files=2)
    config = config_for(tmp_path, spark=buckets(8), settings=with_strategy(Strategy.VALUE))
    spark.conf.set(CHECKPOINT_MANAGER_CONF, ours.replace("FileSystemBased", "FileContextBased"))
    try:
        first = run_pipeline(config, spark)
    finally:
        spark.conf.set(CHECKPOINT_MANAGER_CONF, ours)
    arrive_later(tmp_path, rows[half:], files=2)
    second = run_pipeline(config, spark)
    assert [b.batch_id for b in first.batches] == [0, 1]
    assert [b.batch_id for b in second.batches] == [2, 3]
    continued = normalized(read_table(config, spark))
    assert continued == normalized(model_table(changes))
    whole = tmp_path / "whole"
    write_files(whole / "in", rows, files=4)
    assert (
        normalized(
            read_table(
                _run(config_for(whole, spark=buckets(8), settings=with_strategy(Strategy.VALUE)), spark),
                spark,
            )
        )
        == continued
    )


def _run(config: PipelineConfig, spark: SparkSession) -> PipelineConfig:
    run_pipeline(config, spark)
    return config


def arrive_later(tmp_path: Path, rows: list[dict[str, Any]], files: int) -> None:
    """``rows`` as ``files`` new source files in ``tmp_path / "in"``, written aside first and
    then renamed in, so a running or restarted query sees each file whole."""
    later = tmp_path / "later"
    write_files(later, rows, files=files)
    for path in sorted(later.iterdir()):
        path.rename(tmp_path / "in" / f"late-{path.name}")


def test_a_checkpoint_of_the_blob_layout_continues_on_the_log_layout_and_batches_report_their_state(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The first half on the blob layout (156d090's, and today's ``state_layout="blob"``), the rest
    on the log layout on the same checkpoint: the model's table. Each batch reports its state
    traffic; on the log layout in its log form (``state_inline_bytes=0``: these buckets are small
    enough to be kept inline otherwise) a batch after the first reads only the heads."""
    changes = changelog(seed=13, keys=300, updates=900)
    rows = records(changes)
    half = len(rows) // 2
    write_files(tmp_path / "in", rows[:half], files=2)
    blob: list[BatchProgress] = []
    run_pipeline(config_for(tmp_path, spark=buckets(4, state_layout="blob"), progress=blob.append), spark)
    arrive_later(tmp_path, rows[half:], files=3)
    logged: list[BatchProgress] = []
    config = config_for(
        tmp_path, spark=buckets(4, state_layout="log", state_inline_bytes=0), progress=logged.append
    )
    run_pipeline(config, spark)
    assert normalized(read_table(config, spark)) == normalized(model_table(changes))
    assert [batch.batch_id for batch in blob + logged] == [0, 1, 2, 3, 4]
    assert blob[1].state_bytes_read >= blob[0].state_bytes_written > 0  # a blob read whole
    assert all(batch.state_calls > 0 and batch.state_bytes_written > 0 for batch in blob + logged)
    migrated, warm = logged[0], logged[1:]  # the first reads each bucket's blob once, and logs it
    assert migrated.state_bytes_read >= blob[1].state_bytes_written // 2
    for batch in warm:
        assert batch.state_bytes_read < 4 * 3 * 64  # the heads of 4 buckets (at most 3 states each)
        assert batch.state_bytes_written < blob[1].state_bytes_written
    # and back is refused, in one line, before anything runs (the blob layout reads no logs)
    with pytest.raises(PipelineConfigError, match="holds its state in the log layout"):
        run_pipeline(replace(config, spark=replace(config.spark, state_layout="blob")), spark)
