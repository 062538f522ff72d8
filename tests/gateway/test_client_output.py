"""``upsertmat client`` as a user first meets it (issue 45, item 6), against the real service over
HTTP (no Spark: the jobs are registered and their sinks written by the test): ``list`` before and
after the first commit says what a user understands (no ``batch None``), counts have their
plurals, and ``result --mode table`` into a pipe prints the table plainly with a final newline
and no keys to press."""

from __future__ import annotations

import pytest

from upsertmat.cli import main
from upsertmat.gateway.lifecycle import Event
from upsertmat.gateway.registry import new_id
from upsertmat.sinks import Column, open_sink

from .conftest import TOKEN, Served

COLUMNS = (Column("id", "bigint"), Column("v", "string"))


def registered(served: Served, name: str) -> str:
    (served.root / "data" / name).mkdir(exist_ok=True)
    document = (
        f"name: {name}\nsource: {{path: data/{name}, columns: [{{id: long}}, {{v: string}}]}}\n"
        f"keys: {{primary-key: [id]}}\n"
        f"sink: {{url: {served.root / 'data' / (name + '.db')}, table: {name}}}\n"
    )
    job_id = new_id("j")
    (served.root / "jobs" / job_id).mkdir(parents=True)
    served.gateway.registry.add_job("s-0000000000", name, "job", document, {}, job_id)
    served.gateway.registry.transition(job_id, Event.STARTED)
    return job_id


def listed(served: Served, capsys: pytest.CaptureFixture[str], job: str) -> str:
    assert main(["client", "--gateway", served.url, "--token", TOKEN, "list"]) == 0
    return next(line for line in capsys.readouterr().out.splitlines() if line.startswith(job))


def test_list_before_and_after_the_first_commit(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    job = registered(served, "first")
    assert listed(served, capsys, job) == f"{job}\tRUNNING\tfirst\tno batch yet\t0 rows\t0.0 changes/s"
    spec = served.gateway.resolve(served.gateway.job(job))
    sink = open_sink(spec.sink.url, spec.sink.table, COLUMNS, (0,), changelog=True)
    sink.apply_batch("q", 0, [("+I", (1, "a"))])
    assert listed(served, capsys, job) == f"{job}\tRUNNING\tfirst\tbatch 0\t1 row\t0.0 changes/s"
    sink.apply_batch("q", 1, [("+I", (2, "b"))])
    sink.close()
    assert listed(served, capsys, job) == f"{job}\tRUNNING\tfirst\tbatch 1\t2 rows\t0.0 changes/s"


def test_result_table_into_a_pipe_is_plain(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    job = registered(served, "piped")
    spec = served.gateway.resolve(served.gateway.job(job))
    sink = open_sink(spec.sink.url, spec.sink.table, COLUMNS, (0,), changelog=True)
    sink.apply_batch("q", 0, [("+I", (number, f"v{number}")) for number in range(40)])
    sink.close()
    base = ["client", "--gateway", served.url, "--token", TOKEN, "result", job]
    assert main([*base, "--mode", "table"]) == 0
    out = capsys.readouterr().out  # captured: not a terminal, as a pipe or a file
    assert out.endswith("\n") and "\x1b" not in out
    assert "n/p" not in out and "Ctrl-C" not in out  # no keys to press
    lines = out.splitlines()
    assert lines[0] == f"upsertmat client: job {job} | batch 0 | 40 rows | 0.0 changes/s"
    assert lines[-1] == "rows 1-40 of 40"  # every row, not a terminal's page
    assert main([*base, "--mode", "changelog"]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\n") and out.splitlines()[-1] == "40 changes shown"


def test_a_jobs_history_over_http(served: Served) -> None:
    """``GET /v1/jobs/{job}/history`` (the status page's plots): the batches a job's thread saw in
    this process, oldest first, bounded; none for a job that has not run here; 404 for no job."""
    from upsertmat.client.http import GatewayClient, GatewayError
    from upsertmat.gateway.runtime import HISTORY, JobRuntime
    from upsertmat.spark.config import BatchProgress

    job = registered(served, "plotted")
    with GatewayClient(served.url, TOKEN) as client:
        assert client.history(job).batches == []
        runtime = JobRuntime()
        runtime.started()
        served.gateway.threads.runtimes[job] = runtime  # what the job's thread keeps (no query here)
        for batch in range(HISTORY + 5):
            runtime.waiting = 7 if batch else None
            runtime.on_batch(BatchProgress(batch, 10, 10, 0, False, 0.25, 1.0))
        history = client.history(job)
        assert [point.batch for point in history.batches] == list(range(5, HISTORY + 5))  # the last 300
        last = history.batches[-1]
        assert (last.changes, last.batch_seconds, last.files_waiting) == (10, 0.25, 7)
        assert last.changes_per_second > 0 and last.at.tzinfo is not None
        with pytest.raises(GatewayError) as missing:
            client.history("j-0000000000")
        assert missing.value.status == 404
    served.gateway.threads.forget(job)
