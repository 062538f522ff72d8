"""``DELETE /v1/jobs/J?results=delete`` for every sink a gateway job can have (issue 45, item 1):
the sink's table is dropped first — a SQLite table with its recorded batches and changes, a
Delta table's directory, an Iceberg table from its SQL catalog with its files — and only then is
the job forgotten, so a drop that fails leaves the job there, answers 409 naming what failed, and
a retried DELETE finishes it. Real tables written by the real sinks (no Spark: the sinks run on
the driver) and read back by the independent readers; the service over HTTP (no query runs)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from upsertmat.gateway.lifecycle import Event
from upsertmat.gateway.registry import new_id
from upsertmat.sinks import Column, open_sink
from upsertmat.sinks.sql import BATCHES_TABLE, CHANGES_TABLE

from ..sinks.lakereaders import delta_rows, iceberg_rows
from .conftest import TOKEN, Served

AUTH = {"Authorization": f"Bearer {TOKEN}"}
COLUMNS = (Column("id", "bigint"), Column("v", "string"))


@pytest.fixture
def http(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers=AUTH, timeout=60) as client:
        yield client


def stopped_job(served: Served, name: str, sink_url: str) -> tuple[str, Path]:
    """A job registered as submitted, its sink holding one batch, then stopped (no query); its
    id and its checkpoint directory (which exists, as a run would have left it)."""
    source = served.root / "data" / f"{name}-src"
    source.mkdir(parents=True, exist_ok=True)
    document = (
        f"name: {name}\nsource: {{path: data/{name}-src, columns: [{{id: long}}, {{v: string}}]}}\n"
        f"keys: {{primary-key: [id]}}\nsink: {{url: '{sink_url}', table: {name}}}\n"
    )
    job_id = new_id("j")
    (served.root / "jobs" / job_id).mkdir(parents=True)
    registry = served.gateway.registry
    registry.add_job("s-0000000000", name, "job", document, {}, job_id)
    job = served.gateway.resolve(served.gateway.job(job_id))
    sink = open_sink(job.sink.url, job.sink.table, COLUMNS, (0,), changelog=True)
    sink.apply_batch("q", 0, [("+I", (number, f"v{number}")) for number in range(3)])
    sink.close()
    job.checkpoint.mkdir(parents=True, exist_ok=True)
    (job.checkpoint / "metadata").write_text('{"id": "q"}\n')
    for event in (Event.STARTED, Event.STOP, Event.ENDED):
        registry.transition(job_id, event)
    return job_id, job.checkpoint


def gone(http: httpx.Client, job_id: str) -> bool:
    return http.get(f"/v1/jobs/{job_id}").status_code == 404


def test_deleting_a_delta_jobs_results_removes_its_table(served: Served, http: httpx.Client) -> None:
    table = served.root / "data" / "delta-t"
    job_id, checkpoint = stopped_job(served, "dt", f"delta:///{table}")
    assert sorted(delta_rows(table)) == [(0, "v0"), (1, "v1"), (2, "v2")]
    answer = http.delete(f"/v1/jobs/{job_id}", params={"results": "delete"})
    assert answer.status_code == 200, answer.text  # was a 500 (SinkUrlError: not a SQLite sink)
    assert answer.json() == {"id": job_id, "deleted": True, "results": "delete", "kept_in": None}
    assert gone(http, job_id) and not table.exists() and not checkpoint.exists()
    assert not (served.root / "jobs" / job_id).exists()


def iceberg_tables(warehouse: Path) -> list[tuple[Any, ...]]:
    """The SQL catalog's rows, read with sqlite3 (not pyiceberg)."""
    with sqlite3.connect(warehouse / "catalog.db") as catalog:
        return catalog.execute("SELECT table_namespace, table_name FROM iceberg_tables").fetchall()


def test_deleting_an_iceberg_jobs_results_drops_it_from_its_catalog(
    served: Served, http: httpx.Client
) -> None:
    warehouse = served.root / "data" / "ice"
    job_id, checkpoint = stopped_job(served, "it", f"iceberg:///{warehouse}")
    kept_id, _ = stopped_job(served, "other", f"iceberg:///{warehouse}")  # another table, same catalog
    assert sorted(iceberg_rows(warehouse, "it")) == [(0, "v0"), (1, "v1"), (2, "v2")]
    assert sorted(iceberg_tables(warehouse)) == [("upsertmat", "it"), ("upsertmat", "other")]
    answer = http.delete(f"/v1/jobs/{job_id}", params={"results": "delete"})
    assert answer.status_code == 200, answer.text
    assert gone(http, job_id) and not checkpoint.exists()
    assert iceberg_tables(warehouse) == [("upsertmat", "other")]
    assert not (warehouse / "upsertmat.db" / "it").exists()  # its data and metadata files
    assert sorted(iceberg_rows(warehouse, "other")) == [(0, "v0"), (1, "v1"), (2, "v2")]  # untouched
    assert http.delete(f"/v1/jobs/{kept_id}", params={"results": "delete"}).status_code == 200


def test_a_drop_that_fails_keeps_the_job_and_a_retry_finishes_it(served: Served, http: httpx.Client) -> None:
    database = served.root / "data" / "broken.db"
    job_id, checkpoint = stopped_job(served, "br", str(database))
    good = database.read_bytes()
    database.write_bytes(b"not a database" * 100)  # the sink's file damaged
    answer = http.delete(f"/v1/jobs/{job_id}", params={"results": "delete"})
    assert answer.status_code == 409, answer.text
    message = answer.json()["error"]["message"]
    assert "cannot drop" in message and str(database) in message and "kept" in message
    status = http.get(f"/v1/jobs/{job_id}")  # still there, as it was
    assert status.status_code == 200 and status.json()["state"] == "STOPPED"
    assert checkpoint.exists() and (served.root / "jobs" / job_id).exists()
    database.write_bytes(good)  # fixed: the retried DELETE finishes the job
    assert http.delete(f"/v1/jobs/{job_id}", params={"results": "delete"}).status_code == 200
    assert gone(http, job_id) and not checkpoint.exists()
    with sqlite3.connect(database) as connection:
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "br" not in tables
        for bookkeeping in (BATCHES_TABLE, CHANGES_TABLE):
            query = f"SELECT count(*) FROM {bookkeeping} WHERE sink_table = 'br'"
            assert connection.execute(query).fetchone() == (0,)


def test_two_jobs_may_not_write_one_delta_table_under_two_names(served: Served, http: httpx.Client) -> None:
    """A Delta table is its directory, whatever the job calls it: a second job on it is refused
    (409), so deleting one job's results never removes another's table."""
    table = served.root / "data" / "shared-delta"
    first, _ = stopped_job(served, "sa", f"delta:///{table}")
    session = http.post("/v1/sessions", json={}).json()["session"]
    document = (
        "name: sb\nsource: {path: data/sa-src, columns: [{id: long}, {v: string}]}\n"
        f"keys: {{primary-key: [id]}}\nsink: {{url: 'delta:///{table}', table: another_name}}\n"
    )
    with served.gateway.threads.start_lock:  # were it admitted, its query would not start
        answer = http.post(f"/v1/sessions/{session}/jobs", json={"job": document})
        if answer.status_code == 201:
            http.post(f"/v1/jobs/{answer.json()['id']}/stop")
    assert answer.status_code == 409, answer.text
    assert first in answer.json()["error"]["message"]
    assert http.delete(f"/v1/jobs/{first}", params={"results": "delete"}).status_code == 200
