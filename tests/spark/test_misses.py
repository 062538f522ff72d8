"""Miss explanations in the Spark pipeline: per batch, in the job's summary and in the sink's
side table, with the column named and TTL expiry told apart; outputs unchanged."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from upsertmat.impls.settings import Strategy, TtlSettings
from upsertmat.spark import PipelineConfig
from upsertmat.spark.misses import MISSES_TABLE
from upsertmat.spark.pipeline import read_table, run_pipeline
from upsertmat.spec import Change, MissCause, RowKind

from .test_pipeline import buckets, config_for, with_strategy
from .workload import model_table, normalized, records, write_files

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def nondeterministic(keys: int) -> list[Change]:
    """Per key an insert, then an update whose -U recomputed ``payload`` (a uuid-like value)."""
    changes = []
    for key in range(keys):
        changes += [
            Change(RowKind.INSERT, (key, 1, 0.5, True, f"uuid-{key}-a")),
            Change(RowKind.UPDATE_BEFORE, (key, 1, 0.5, True, f"uuid-{key}-b")),  # a miss
            Change(RowKind.UPDATE_AFTER, (key, 2, 1.5, False, f"uuid-{key}-c")),
        ]
    return changes


def side_table(config: PipelineConfig) -> list[tuple[Any, ...]]:
    path = config.sink.url.removeprefix("sqlite://")
    with sqlite3.connect(path) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if MISSES_TABLE not in tables:  # created by the first batch with a miss
            return []
        query = f"SELECT arrival, op, sink_key, cause, explanation FROM {MISSES_TABLE} ORDER BY arrival"
        return list(db.execute(query))


@pytest.mark.parametrize(("strategy", "count"), [(Strategy.VALUE, None), (Strategy.MAP, 3)])
def test_planted_misses_are_counted_named_and_recorded(
    spark: SparkSession, tmp_path: Path, strategy: Strategy, count: int | None
) -> None:
    changes = nondeterministic(6)
    write_files(tmp_path / "in", records(changes), files=2)
    config = config_for(tmp_path, settings=with_strategy(strategy), spark=buckets(count))
    result = run_pipeline(config, spark)
    assert sum(batch.misses for batch in result.batches) == 6
    assert all("payload 3" in b.miss_columns for b in result.batches if b.misses)
    summary = result.misses
    assert (summary.misses, summary.causes[MissCause.DIFFERS]) == (6, 6)
    assert set(summary.columns) == {4} and summary.columns[4].differed == 6
    lines = summary.lines(["id", "version", "amount", "flag", "payload"])
    assert any(
        "column 4 (payload) differed in 6 of those 6: its values never repeat" in line for line in lines
    )
    recorded = side_table(config)
    assert [(arrival, op, cause) for arrival, op, _, cause, _ in recorded] == [
        (3 * key + 1, "-U", "differs") for key in range(6)
    ]
    assert json.loads(recorded[0][4])["candidates"][0]["diffs"] == [
        {"column": 4, "stored": "uuid-0-a", "retracted": "uuid-0-b"}
    ]
    assert normalized(read_table(config, spark)) == normalized(model_table(changes))  # outputs unchanged
    quiet = config_for(
        tmp_path / "quiet", settings=with_strategy(strategy, miss_rows=0), spark=buckets(count)
    )
    write_files(quiet.source.path, records(changes), files=2)
    silent = run_pipeline(quiet, spark)
    assert silent.misses.misses == 0 and not side_table(quiet)
    assert normalized(read_table(quiet, spark)) == normalized(read_table(config, spark))


def test_a_clean_stream_records_nothing(spark: SparkSession, tmp_path: Path) -> None:
    fixed = []
    for key in range(4):
        fixed += [
            Change(RowKind.INSERT, (key, 1, 0.5, True, "a")),
            Change(RowKind.UPDATE_BEFORE, (key, 1, 0.5, True, "a")),
            Change(RowKind.UPDATE_AFTER, (key, 2, 1.5, False, "b")),
        ]
    write_files(tmp_path / "in", records(fixed), files=1)
    config = config_for(tmp_path)
    result = run_pipeline(config, spark)
    assert result.misses.misses == 0 and all(batch.misses == 0 for batch in result.batches)
    assert side_table(config) == []


def test_ttl_expiry_is_told_from_a_missing_add_across_batches(spark: SparkSession, tmp_path: Path) -> None:
    """Run 1 inserts keys 0-1; after the TTL, run 2 touches another key (the cleanup timers of
    0 and 1 fire and remove their rows); run 3 retracts key 0 (expired) and key 5 (never added)."""
    ttl = 2000
    runs = [
        [Change(RowKind.INSERT, (key, 1, 0.5, True, "a")) for key in range(2)],
        [Change(RowKind.INSERT, (7, 1, 0.5, True, "x"))],
        [Change(RowKind.DELETE, (0, 1, 0.5, True, "a")), Change(RowKind.DELETE, (5, 1, 0.5, True, "z"))],
    ]
    rows = records([change for run in runs for change in run])
    config = config_for(tmp_path, settings=with_strategy(Strategy.VALUE, ttl=TtlSettings(ttl_ms=ttl)))
    write_files(tmp_path / "in", rows[:2], files=1)
    run_pipeline(config, spark)
    time.sleep(ttl / 1000 + 1)
    arrive(tmp_path, "second", rows[2:3])
    run_pipeline(config, spark)
    arrive(tmp_path, "third", rows[3:])
    result = run_pipeline(config, spark)
    causes = {json.loads(text)["key"][0]: cause for _, _, _, cause, text in side_table(config)}
    assert causes == {0: "expired", 5: "never_added"}
    assert result.misses.causes[MissCause.EXPIRED] == result.misses.causes[MissCause.NEVER_ADDED] == 1


def arrive(tmp_path: Path, name: str, rows: list[dict[str, Any]]) -> None:
    """``rows`` as one new source file ``NAME-...``, written aside, then renamed in."""
    stage = tmp_path / f"stage-{name}"
    write_files(stage, rows, files=1)
    for path in sorted(stage.iterdir()):
        path.rename(tmp_path / "in" / f"{name}-{path.name}")
