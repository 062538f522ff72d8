"""tools/pg_sink_wal.py: the PostgreSQL sink's batches at a (small) table size, with the server's
WAL and update counters, on the tests' throw-away server."""

from __future__ import annotations

import json

import pytest

from ..spark.postgres import new_database
from ..toolscripts import load


def tables(url: str) -> set[str]:
    import psycopg

    with psycopg.connect(url) as connection:
        found = connection.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'").fetchall()
    return {str(row[0]) for row in found}


@pytest.mark.parametrize(("fillfactor", "all_hot"), [(0, True), (100, False)])
def test_every_batch_is_counted_and_the_table_dropped(
    postgres_url: str, capsys: pytest.CaptureFixture[str], fillfactor: int, all_hot: bool
) -> None:
    url = new_database(postgres_url, "wal_tool")
    arguments = ["--url", url, "--size", "20000", "--batches", "2", "--upserts", "500"]
    load("pg_sink_wal").main([*arguments, "--fillfactor", str(fillfactor)])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["rows"] == 20_000
    assert lines[0]["reloptions"] == (["fillfactor=90"] if fillfactor == 0 else ["fillfactor=100"])
    batches = lines[1:-1]
    assert [batch["batch"] for batch in batches] == [0, 1]
    for batch in batches:
        assert batch["updates"] == batch["keys"] > 480  # 500 random keys of 20,000: few repeat
        assert batch["seconds"] > 0 and batch["wal_records"] > 0 and batch["wal_bytes"] > 0
        # the sink's own table: every update stays on its page; full pages: most move
        assert (batch["hot_updates"] == batch["updates"]) is all_hot
    assert set(lines[-1]["settings"]) >= {"wal_compression", "max_wal_size", "shared_buffers"}
    assert tables(url) == {"_upsertmat_batches"}


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        load("pg_sink_wal").main(["--url", "postgresql://127.0.0.1:1/none", "--fillfactor", "5"])
    assert stopped.value.code == 2
    assert "--fillfactor must be 0 or 10-100" in capsys.readouterr().err
