"""Issue 31, items 1-5, each reproduced over HTTP against the real service (no Spark).

1. the gateway's own files (registry, lock, logs, other jobs' directories) are refused as a
   source, a checkpoint or a sink (403), another job's table or checkpoint too (409);
2. the previous changelog token returns exactly the page it returned before, whatever
   happened since (a batch committed, the job stopped);
3. the same token asked by 8 clients at once gets the same page, never a 500;
4. tokens with Unicode digits are malformed (400); a chunked body over the bound is a 413;
5. credentials only in ``Authorization`` (the scheme in any case), never in ``?token=``, which is
   the paging token; the status page's cookie from a one-time link, for GET only.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from collections.abc import Iterator

import httpx
import pytest

from upsertmat.gateway.lifecycle import Event
from upsertmat.gateway.registry import new_id
from upsertmat.sinks import BatchSink, Column, open_sink

from .conftest import TOKEN, Served

AUTH = {"Authorization": f"Bearer {TOKEN}"}
COLUMNS = (Column("id", "bigint"), Column("v", "string"))


@pytest.fixture
def http(served: Served) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served.url, headers=AUTH, timeout=60) as client:
        yield client


def job_document(source: str, extra: str = "") -> str:
    columns = "[{id: long}, {v: string}]"
    return f"name: t\nsource: {{path: {source}, columns: {columns}}}\nkeys: {{primary-key: [id]}}\n{extra}"


def registered(served: Served, document: str) -> str:
    """A job put into the registry as submitted (STARTING, then RUNNING), no query."""
    job_id = new_id("j")
    (served.root / "jobs" / job_id).mkdir(parents=True)
    served.gateway.registry.add_job("s-0000000000", "t", "job", document, {}, job_id)
    served.gateway.registry.transition(job_id, Event.STARTED)
    return job_id


def sink_of(served: Served, job_id: str) -> BatchSink:
    job = served.gateway.resolve(served.gateway.job(job_id))
    return open_sink(job.sink.url, job.sink.table, COLUMNS, (0,), changelog=True)


def submit(http: httpx.Client, document: str) -> httpx.Response:
    session = http.post("/v1/sessions", json={}).json()["session"]
    return http.post(f"/v1/sessions/{session}/jobs", json={"job": document})


def test_1_the_gateways_own_files_are_refused(served: Served, http: httpx.Client) -> None:
    root = served.root
    (root / "data" / "src").mkdir(exist_ok=True)
    other = registered(
        served, job_document("data/src", f"sink: {{url: {root / 'data' / 'other.db'}, table: t}}\n")
    )
    (root / "logs").mkdir(exist_ok=True)
    os.link(root / "gateway.db", root / "data" / "linked.db")
    refused = {
        f"sink: {{url: {root / 'gateway.db'}, table: sessions}}\n": 403,  # the report's case
        f"sink: {{url: 'sqlite:///{root / 'gateway.db'}', table: jobs}}\n": 403,
        f"sink: {{url: {root / 'data' / 'linked.db'}, table: sessions}}\n": 403,  # a link to the registry
        f"sink: {{url: {root / 'gateway.lock'}, table: t}}\n": 403,
        f"sink: {{url: {root / 'jobs' / other / 'result.db'}, table: t}}\n": 403,
        f"checkpoint: {root / 'jobs' / other / 'ck'}\n": 403,
        f"checkpoint: {root}\n": 403,
        f"checkpoint: {root / 'logs'}\n": 403,
        f"sink: {{url: {root / 'data' / 'other.db'}, table: t}}\n": 409,  # another job's table
        f"checkpoint: {root / 'data' / 'src'}\n": 409,  # another job's source
    }
    for extra, status in refused.items():
        answer = submit(http, job_document("data/src", extra))
        assert answer.status_code == status, (extra, answer.text)
        assert answer.json()["error"]["message"]
    for source in ("logs", ".", "jobs", f"jobs/{other}"):
        answer = submit(http, job_document(source))
        assert answer.status_code == 403, (source, answer.text)
    assert http.get("/v1/sessions/s-0123456789").status_code == 404  # nothing was written into the registry
    assert [record.id for record in served.gateway.registry.jobs()] == [other]


def test_2_the_previous_token_returns_the_page_it_returned_before(served: Served, http: httpx.Client) -> None:
    (served.root / "data" / "two").mkdir(exist_ok=True)
    job = registered(
        served, job_document("data/two", f"sink: {{url: {served.root / 'data' / 'two.db'}, table: t}}\n")
    )
    sink = sink_of(served, job)
    sink.apply_batch("q", 0, [("+I", (number, "a")) for number in range(3)])
    path = f"/v1/jobs/{job}/result/changelog"
    first = http.get(path).json()
    assert [change["pos"] for change in first["changes"]] == [1, 2, 3]
    empty = http.get(path, params={"token": first["next_token"]})  # token N: an empty page
    assert empty.json()["changes"] == [] and empty.json()["next_token"] is not None
    sink.apply_batch("q", 1, [("+U", (number, "b")) for number in range(58)])  # a batch commits
    served.gateway.stop(job)  # and the job stops
    assert served.gateway.job(job).state == "STOPPED"
    again = http.get(path, params={"token": first["next_token"]})  # N again: what it said before
    assert again.content == empty.content
    rest = http.get(path, params={"token": empty.json()["next_token"]}).json()
    assert len(rest["changes"]) == 3 * 2 + 55 and not rest["eos"]
    end = http.get(path, params={"token": rest["next_token"]}).json()
    assert end == {"job": job, "changes": [], "token": rest["next_token"], "next_token": None, "eos": True}
    sink.close()


def test_3_one_token_asked_by_8_clients_at_once_gets_one_page(served: Served) -> None:
    (served.root / "data" / "three").mkdir(exist_ok=True)
    job = registered(
        served, job_document("data/three", f"sink: {{url: {served.root / 'data' / 'three.db'}, table: t}}\n")
    )
    sink = sink_of(served, job)
    path = f"/v1/jobs/{job}/result/changelog"
    clients = [httpx.Client(base_url=served.url, headers=AUTH, timeout=60) for _ in range(8)]
    try:
        token = clients[0].get(path).json()["token"]
        bodies: list[list[tuple[int, bytes]]] = []
        for round_ in range(40):
            sink.apply_batch("q", round_, [("+I", (round_ * 10 + number, "x")) for number in range(3)])
            answers: list[tuple[int, bytes]] = [(0, b"")] * 8
            gate = threading.Barrier(8)

            def ask(
                index: int,
                token: str = token,
                answers: list[tuple[int, bytes]] = answers,
                gate: threading.Barrier = gate,
            ) -> None:
                gate.wait()
                response = clients[index].get(path, params={"token": token, "max_changes": 2})
                answers[index] = (response.status_code, response.content)

            threads = [threading.Thread(target=ask, args=(index,)) for index in range(8)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            bodies.append(answers)
            assert {status for status, _ in answers} == {200}, answers
            assert len({content for _, content in answers}) == 1  # the same bytes for everyone
            token = json.loads(answers[0][1])["next_token"]
        positions = [change["pos"] for answers in bodies for change in json.loads(answers[0][1])["changes"]]
        assert positions == list(range(1, len(positions) + 1))
    finally:
        for client in clients:
            client.close()
        sink.close()


def test_4_unicode_digits_and_chunked_bodies(served: Served, http: httpx.Client) -> None:
    (served.root / "data" / "four").mkdir(exist_ok=True)
    job = registered(
        served, job_document("data/four", f"sink: {{url: {served.root / 'data' / 'four.db'}, table: t}}\n")
    )
    for kind, prefix in (("table", "t"), ("changelog", "c")):
        for number in ("\u00b2", "\u0661", "\uff11", "1\u00b2"):
            answer = http.get(
                f"/v1/jobs/{job}/result/{kind}", params={"token": f"{prefix}-0123456789.{number}"}
            )
            assert answer.status_code == 400, (kind, number, answer.text)

    def chunks() -> Iterator[bytes]:
        yield b'{"properties": {}, "x": "'
        for _ in range(80):
            yield b"y" * 1024
        yield b'"}'

    answer = http.post("/v1/sessions", content=chunks(), headers={"content-type": "application/json"})
    assert answer.status_code == 413, answer.text
    assert "max-body-bytes" in answer.json()["error"]["message"]


def test_5_credentials_travel_only_in_the_authorization_header(served: Served) -> None:
    (served.root / "data" / "five").mkdir(exist_ok=True)
    job = registered(
        served, job_document("data/five", f"sink: {{url: {served.root / 'data' / 'five.db'}, table: t}}\n")
    )
    with httpx.Client(base_url=served.url, timeout=60) as plain:
        assert plain.get("/v1/jobs", params={"token": TOKEN}).status_code == 401  # not a credential
        assert plain.get("/", params={"token": TOKEN}).status_code == 401
        for scheme in ("Bearer", "bearer", "BEARER"):
            assert plain.get("/v1/jobs", headers={"Authorization": f"{scheme} {TOKEN}"}).status_code == 200
        assert plain.get("/v1/jobs", headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
        # paging with ?token= while authenticated by the header
        page = plain.get(f"/v1/jobs/{job}/result/changelog", headers=AUTH).json()
        assert (
            plain.get(
                f"/v1/jobs/{job}/result/changelog", params={"token": page["next_token"]}, headers=AUTH
            ).status_code
            == 200
        )
        # the status page: a one-time link sets a cookie that opens GETs only
        link = plain.post("/v1/login-links", headers=AUTH).json()["path"]
        assert plain.get("/login/" + secrets.token_urlsafe(24), follow_redirects=False).status_code == 401
        opened = plain.get(link, follow_redirects=False)
        assert opened.status_code == 303 and "upsertmat_page" in opened.cookies
        cookie = opened.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert plain.get("/").status_code == 200
        assert plain.get("/v1/jobs").status_code == 200
        assert plain.post("/v1/sessions", json={}).status_code == 401  # not for writes
        assert plain.get(link, follow_redirects=False).status_code == 401  # used once


def test_5_the_authorization_header_is_read_strictly(served: Served) -> None:
    """Issue 45, item 5: ``Bearer  TOKEN`` (two spaces) was accepted, and of two Authorization
    headers the last won. Exactly one header, ``<scheme> <token>`` with one space, or 401."""
    with httpx.Client(base_url=served.url, timeout=60) as plain:
        for value in (f"Bearer  {TOKEN}", f"Bearer\t{TOKEN}", f"Bearer {TOKEN} x", "Bearer", f"{TOKEN}"):
            answer = plain.get("/v1/jobs", headers={"Authorization": value})
            assert answer.status_code == 401, value
        assert "one space" in plain.get("/v1/jobs", headers={"Authorization": f"Bearer  {TOKEN}"}).text
        for pair in ((f"Bearer {TOKEN}", f"Bearer {TOKEN}"), ("Bearer wrong", f"Bearer {TOKEN}")):
            answer = plain.get("/v1/jobs", headers=[("Authorization", pair[0]), ("Authorization", pair[1])])
            assert answer.status_code == 401, pair
            assert "one Authorization header" in answer.json()["error"]["message"]
        assert plain.get("/v1/jobs", headers={"Authorization": f"bEaReR {TOKEN}"}).status_code == 200
        # a proxy's Basic credentials passed on are no credential, and do not hide the page's cookie
        link = plain.post("/v1/login-links", headers=AUTH).json()["path"]
        assert plain.get(link, follow_redirects=False).status_code == 303
        assert plain.get("/v1/jobs", headers={"Authorization": "Basic dXNlcjpwdw=="}).status_code == 200
        plain.cookies.clear()
        assert plain.get("/v1/jobs", headers={"Authorization": "Basic dXNlcjpwdw=="}).status_code == 401


def test_refused_transitions_answer_in_the_users_words(served: Served, http: httpx.Client) -> None:
    """Issue 45, item 6: deleting a running job answered 409 with the table's internal event
    names (``from RUNNING: failed, lost, resume, stop``) instead of what to do."""
    (served.root / "data" / "words").mkdir(exist_ok=True)
    job = registered(
        served, job_document("data/words", f"sink: {{url: {served.root / 'data' / 'words.db'}, table: t}}\n")
    )
    refused = http.delete(f"/v1/jobs/{job}")
    assert refused.status_code == 409
    assert refused.json()["error"]["message"] == (
        f"job {job} is RUNNING: stop it first (POST /v1/jobs/{job}/stop, or upsertmat client stop {job}), "
        "then delete it"
    )
    again = http.post(f"/v1/jobs/{job}/restart")
    assert again.status_code == 409 and "stop it first" in again.json()["error"]["message"]
    served.gateway.registry.transition(job, Event.STOP)  # STOPPING: its last batch commits
    for method, path, what in (
        ("DELETE", f"/v1/jobs/{job}", "delete"),
        ("POST", f"/v1/jobs/{job}/restart", "restart"),
    ):
        answer = http.request(method, path)
        assert answer.status_code == 409
        assert answer.json()["error"]["message"] == (
            f"job {job} is STOPPING: wait until it is STOPPED (its last batch is committing), then {what} it"
        )
    served.gateway.registry.transition(job, Event.ENDED)
    assert http.delete(f"/v1/jobs/{job}").status_code == 200
