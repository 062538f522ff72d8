"""Submitting over HTTP reads the document once and resolves the job once (issue 44, item 4): a
plan the request's JSON already holds is not turned into text and parsed again, and the job's
thread runs the spec the request resolved. Through the real app on the real server (no Spark:
the job is stopped while its thread waits for the start lock, before any query starts, which is
the documented stop-before-start path)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from upsertmat.gateway import documents
from upsertmat.plan.codec import plan_to_json
from upsertmat.plan.compiler import compile_job

from .conftest import TOKEN, Served

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def counted(served: Served, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How often documents are parsed and jobs resolved from a document, counted around the
    real functions (which still do the work)."""
    counts = {"parsed": 0, "resolved": 0}
    parse, resolve = documents.load_submitted, served.gateway.resolver.resolve_document

    def parsing(text: str) -> Any:
        counts["parsed"] += 1
        return parse(text)

    def resolving(*args: Any, **kwargs: Any) -> Any:
        counts["resolved"] += 1
        return resolve(*args, **kwargs)

    monkeypatch.setattr(documents, "load_submitted", parsing)
    monkeypatch.setattr(served.gateway.resolver, "resolve_document", resolving)
    yield counts


def wait_stopped(http: httpx.Client, job: str) -> dict[str, Any]:
    deadline = time.monotonic() + 60  # a bound, not a timing: the thread ends as soon as it runs
    while time.monotonic() < deadline:
        status: dict[str, Any] = http.get(f"/v1/jobs/{job}").json()
        if status["state"] == "STOPPED":
            return status
        time.sleep(0.05)
    raise AssertionError(f"job {job} did not stop")


def test_a_submitted_job_or_plan_is_read_once_and_resolved_once(
    served: Served, counted: dict[str, int]
) -> None:
    (served.root / "data" / "once").mkdir(exist_ok=True)
    job_text = (
        "name: once\nsource: {path: data/once, columns: [{id: long}, {v: string}]}\n"
        "keys: {primary-key: [id]}\nsink: {internal: true, table: once}\n"
        f"checkpoint: {served.root / 'checkpoints' / 'once'}\n"  # a plan holds it: not in jobs/<id>/
    )
    threads = served.gateway.threads
    with httpx.Client(base_url=served.url, headers=AUTH, timeout=60) as http:
        session = http.post("/v1/sessions", json={}).json()["session"]
        with threads.start_lock:  # the job threads wait here, before their query would start
            answer = http.post(f"/v1/sessions/{session}/jobs", json={"job": job_text})
            assert answer.status_code == 201, answer.text
            job = answer.json()["id"]
            assert http.post(f"/v1/jobs/{job}/stop").json()["state"] == "STOPPING"
        status = wait_stopped(http, job)
        assert status["table"] == "once" and status["sink"] == "internal"
        assert counted == {"parsed": 1, "resolved": 1}  # the YAML once; the job once, for its thread too

        spec = served.gateway.resolve(served.gateway.job(job))
        plan = plan_to_json(compile_job(spec))
        plan_text = json.dumps(plan)
        http.delete(f"/v1/jobs/{job}", params={"results": "delete"})
        with threads.start_lock:
            answer = http.post(f"/v1/sessions/{session}/jobs", json={"plan": plan})
            assert answer.status_code == 201, answer.text
            planned = answer.json()["id"]
            http.post(f"/v1/jobs/{planned}/stop")
        assert wait_stopped(http, planned)["kind"] == "plan"
        assert counted == {"parsed": 1, "resolved": 2}  # the plan: not parsed again, resolved once
        record = served.gateway.job(planned)
        assert json.loads(record.document) == json.loads(plan_text)  # kept as text for a restart
        http.delete(f"/v1/jobs/{planned}", params={"results": "delete"})
