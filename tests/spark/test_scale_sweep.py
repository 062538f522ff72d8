"""``upsertmat bench --pipeline --table-sizes``, end to end at a small size: the sweep's runs
leave tables equal to its model, into SQLite and into PostgreSQL, and ``--pipeline-sink
postgresql`` sweeps PostgreSQL alone. The command runs in a process of its own (its own Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .postgres import new_database

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def sweep(tmp_path: Path, *options: str) -> list[dict[str, object]]:
    """The runs of a sweep of 2,000 keys, one batch of 200 changes, whole rows."""
    command = [sys.executable, "-m", "upsertmat", "bench", "--pipeline", "--table-sizes", "2000"]
    command += ["--batch-changes", "200", "--scale-batches", "1", "--upsert-key", "off"]
    command += ["--output-dir", str(tmp_path / "out"), "--tmp-dir", str(tmp_path), "--format", "json"]
    done = subprocess.run([*command, *options], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    runs: list[dict[str, object]] = json.loads(done.stdout)["runs"]
    return runs


@pytest.mark.parametrize(
    ("sinks", "ran"), [("sqlite", ["sqlite", "postgresql"]), ("postgresql", ["postgresql"])]
)
def test_each_run_leaves_the_models_table(
    tmp_path: Path, postgres_url: str, sinks: str, ran: list[str]
) -> None:
    import psycopg

    url = new_database(postgres_url, "sweep")
    runs = sweep(tmp_path, "--pipeline-sink", sinks, "--postgres-url", url)
    assert [run["sink"] for run in runs] == ran
    assert all(run["table_matches_model"] is True and run["rows"] == 2000 for run in runs)
    with psycopg.connect(url) as connection:  # the sweep's table is dropped after its run
        tables = connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    assert [name for (name,) in tables if name.startswith("scale")] == []
