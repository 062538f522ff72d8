"""``upsertmat gateway`` as a user runs it: a real process on loopback, a real HTTP client.

One gateway process for the module (with a token, so every request must carry it). Checked:
jobs submitted and their results while they commit (every table snapshot page set equals the
changelog replayed up to the snapshot's batch; changelog pages asked twice and asked again with
the previous token are identical), a job killed by a bad file is FAILED while another runs on,
the gateway SIGKILLed and restarted mid-stream (the job resumes, tokens stay valid), the final
table equals the model and an uninterrupted ``upsertmat run``; hostile requests get 4xx JSON and
write nothing outside the data root; the status page in a real headless Chromium.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pyspark.sql import SparkSession

from upsertmat.cli import main
from upsertmat.client.http import GatewayClient, GatewayError
from upsertmat.demo.tables import expected_table, read_sqlite_table
from upsertmat.demo.workload import DemoShape, generate
from upsertmat.gateway.contract import ResultsOnDelete
from upsertmat.gateway.malloc import arena_count

from ..prerequisites import require
from ..spark.sockets import descendants
from .process import GatewayProcess, drop_file, records, replay

pytestmark = [pytest.mark.spark, pytest.mark.slow]

TOKEN = "test-token-4b1d"
FILES = 6
JOB = """\
name: users
source:
  path: data/users
  columns: [{id: long}, {level: long}, {badge: string}]
keys: {primary-key: [id]}
sink: {internal: true, table: users}
spark: {max-files-per-trigger: 1}
"""
FAILING = """\
name: fragile
source:
  path: data/fragile
  columns: [{id: long}, {level: long}, {badge: string}]
keys: {primary-key: [id]}
sink: {url: data/fragile.db, table: fragile}
"""


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="upsertmat-gw-test-"))
    (directory / "root" / "data").mkdir(parents=True)
    yield directory / "root"
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture(scope="module")
def gateway(root: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(root, token=TOKEN)
    process.start()
    yield process
    process.close()


def client_of(gateway: GatewayProcess) -> GatewayClient:
    return GatewayClient(gateway.url, TOKEN, timeout=60)


def wait_for(predicate: Any, timeout: float = 120.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def snapshot_rows(client: GatewayClient, job: str, token: str | None = None) -> tuple[int | None, list[Any]]:
    """(batch, rows) of one snapshot, every page (page size 7: several pages)."""
    page = (
        client.table_page(job, token=token, page_size=7) if token is None else client.table_page(job, token)
    )
    batch, rows = page.batch, list(page.rows)
    while page.next_token:
        page = client.table_page(job, page.next_token)
        assert page.batch == batch
        rows.extend(page.rows)
    return batch, rows


class ChangelogReader:
    """Follows a job's changelog asking every page twice: the second time with the token just
    used, which is then the previous one (Flink's retry rule: the same page again)."""

    def __init__(self, client: GatewayClient, job: str) -> None:
        self.client, self.job = client, job
        self.changes: list[dict[str, Any]] = []
        self.token: str | None = None
        self.used = ""
        self.eos = False

    def read(self) -> int:
        page = self.client.changelog_page(self.job, self.token, max_changes=25)
        again = self.client.changelog_page(self.job, page.token, max_changes=25)  # a retry
        assert again == page
        self.changes.extend(change.model_dump() for change in page.changes)
        self.used = page.token
        self.token = page.next_token
        self.eos = page.eos
        return len(page.changes)

    def drain(self) -> None:
        while self.read() and not self.eos:
            pass


def table_of(rows: list[Any]) -> dict[Any, tuple[Any, ...]]:
    return {row[0]: tuple(row) for row in rows}


def test_jobs_results_failure_and_restart(
    gateway: GatewayProcess, root: Path, spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = generate(DemoShape(users=30, events=240, seed=11))
    arrivals = records(data.arrival)
    size = -(-len(arrivals) // FILES)
    chunks = [arrivals[i : i + size] for i in range(0, len(arrivals), size)]
    source = root / "data" / "users"
    drop_file(source, "part-00.jsonl", chunks[0])
    (root / "data" / "fragile").mkdir(parents=True)
    drop_file(root / "data" / "fragile", "part-00.jsonl", chunks[0])

    client = client_of(gateway)
    session = client.open_session({"table.exec.sink.upsert-materialize-strategy.type": "MAP"})
    job = client.submit(session, job=JOB).id
    fragile = client.submit(session, job=FAILING, settings={"table.exec.state.ttl": "1 h"}).id
    assert {item.id for item in client.jobs()} >= {job, fragile}
    assert "sinkMaterializeState: ttl 3600000 ms (1 h)" in client.explain(fragile)
    assert "strategy MAP" in client.explain(job)  # the session's layer

    reader = ChangelogReader(client, job)
    # `upsertmat client result --follow` as a user runs it: it must ride out the SIGKILL and the
    # restart below (retrying with backoff) and end at the stop with every change once
    follower_out = (tmp_path / "follower.jsonl").open("wb")
    follower = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "upsertmat",
            "client",
            "--data-root",
            str(root),
            "--token",
            TOKEN,
            "result",
            job,
            "--mode",
            "tableau",
            "--format",
            "jsonl",
            "--follow",
            "--interval",
            "0.3",
            "--retry-seconds",
            "900",
        ],
        stdout=follower_out,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: client.job(job).committed_batch == 0, what="the first batch")
    # a bad file kills the fragile job only
    drop_file(
        root / "data" / "fragile",
        "part-01.jsonl",
        [{"seq": 10_000, "op": "XX", "id": 1, "level": 1, "badge": "b"}],
    )
    failed = wait_for(
        lambda: (s := client.job(fragile).model_dump())["state"].value == "FAILED" and s,
        what="the fragile job to fail",
    )
    # the one-line bad-input message of the embedded run, naming the file, line and value
    assert re.search(
        r"^bad input in micro-batch \d+: \S*/fragile/part-01\.jsonl line 1: unknown op 'XX' in column 'op' "
        r"\(expected one of \+I, -U, \+U, -D\); nothing of this batch is committed",
        failed["error"],
    ), failed["error"]
    assert client.job(job).state.value == "RUNNING"

    pinned: list[tuple[int | None, list[Any], str | None]] = []
    for number in range(1, FILES):
        if number == 3:  # SIGKILL the gateway mid-stream; tokens handed out before stay valid
            first_page = client.table_page(job, page_size=7)
            gateway.kill()
            client.close()
            drop_file(source, f"part-{number:02d}.jsonl", chunks[number])
            gateway.start()
            client = client_of(gateway)
            reader.client = client
            again_batch, again_rows = snapshot_rows(client, job, first_page.token)
            assert again_batch == first_page.batch and again_rows[:7] == first_page.rows
            assert client.job(fragile).state.value == "FAILED"  # not resumed
        else:
            drop_file(source, f"part-{number:02d}.jsonl", chunks[number])
        batch, rows = snapshot_rows(client, job)
        pinned.append((batch, rows, None))
        reader.read()
        wait_for(
            lambda number=number, client=client: (client.job(job).committed_batch or 0) >= number,
            what=f"batch {number}",
        )
    reader.drain()
    batch, rows = snapshot_rows(client, job)
    pinned.append((batch, rows, None))

    # every snapshot equals the changelog replayed up to its batch: one committed batch, whole
    for batch, rows, _ in pinned:
        assert batch is not None
        assert table_of(rows) == replay([c for c in reader.changes if c["batch"] <= batch]), batch
    positions = [c["pos"] for c in reader.changes]
    assert positions == list(range(1, len(positions) + 1))  # nothing lost or repeated across the kill
    expected = expected_table(data.logical)
    assert replay(reader.changes) == expected == table_of(pinned[-1][1])

    # the same job under an uninterrupted `upsertmat run` leaves the same table
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.yaml").write_text(
        JOB.replace("data/users", str(source)).replace(
            "sink: {internal: true, table: users}", "sink: {url: run.db, table: users}"
        )
    )
    assert main(["run", "job.yaml", "--quiet", "--strategy", "MAP"]) == 0
    assert read_sqlite_table(tmp_path / "run.db", "users") == expected

    # stop at a batch boundary: the changelog ends (eos) and a stale token is refused
    assert client.stop(job).state.value in ("STOPPING", "STOPPED")
    wait_for(lambda: client.job(job).state.value == "STOPPED", what="the stop")
    reader.drain()
    assert reader.eos and reader.token is None
    assert replay(reader.changes) == expected  # nothing after the stop
    _, follower_err = follower.communicate(timeout=300)
    follower_out.close()
    assert follower.returncode == 0, follower_err
    followed = [json.loads(line) for line in (tmp_path / "follower.jsonl").read_text().splitlines()]
    assert [(c["pos"], c["op"], c["row"]) for c in followed] == [
        (c["pos"], c["op"], c["row"]) for c in reader.changes
    ]  # through the SIGKILL and the restart: every change once, in order
    with pytest.raises(GatewayError) as stale:
        client.changelog_page(job, reader.used.rsplit(".", 1)[0] + ".0")
    assert stale.value.status == 410
    client.close()


HOSTILE_JOB = (
    "name: h\nsource: {{path: {path}, columns: [{{id: long}}]}}\nkeys: {{primary-key: [id]}}\n{extra}"
)


def test_hostile_requests_get_4xx_and_write_nothing_outside(
    gateway: GatewayProcess, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "data" / "escape").symlink_to(outside)
    url = gateway.url
    with httpx.Client(base_url=url, timeout=30) as http:
        assert http.get("/v1/jobs").status_code == 401
        assert http.get("/v1/jobs", headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert http.get("/", params={"token": "wrong"}).status_code == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        session = http.post("/v1/sessions", json={}, headers=auth).json()["session"]
        jobs = f"/v1/sessions/{session}/jobs"
        bodies: list[tuple[Any, int]] = [
            (b"{", 400),
            (b"\xff\xfe garbage", 400),
            (b'{"job": "x: [", "settings": {}}', 400),
            (b'{"jobb": "name: x"}', 400),
            (b'{"job": "a: 1", "plan": {}}', 400),
            (b'{"job": "- a list"}', 400),
            (b'{"job": "name: x", "settings": {"table.exec.state.tll": 1}}', 400),
        ]
        for path, extra, status in (
            ("../outside", "", 403),
            (str(outside), "", 403),
            ("data/escape", "", 403),
            ("data/users", f"sink: {{url: {outside / 'x.db'}}}\n", 403),
            ("data/users", "sink: {url: 'sqlite:///../x.db'}\n", 403),
            ("data/users", "sink: {url: 'postgresql://u@127.0.0.1:1/db'}\n", 403),
            ("data/users", f"checkpoint: {outside / 'ck'}\n", 403),
            ("data/users", "spark: {master: 'spark://10.0.0.1:7077'}\n", 400),
            ("data/missing", "", 404),
            ("logs", "", 403),
            ("data/users", f"sink: {{url: {gateway.root / 'gateway.db'}, table: sessions}}\n", 403),
        ):
            bodies.append(({"job": HOSTILE_JOB.format(path=path, extra=extra)}, status))
        for body, status in bodies:
            answer = (
                http.post(jobs, json=body, headers=auth)
                if isinstance(body, dict)
                else http.post(jobs, content=body, headers={**auth, "content-type": "application/json"})
            )
            assert answer.status_code == status, (body, answer.text)
            assert answer.json()["error"]["message"]
        huge = http.post(
            jobs, content=b"{" + b" " * (2 << 20) + b"}", headers={**auth, "content-type": "application/json"}
        )
        assert huge.status_code == 413
        for path, status in (
            ("/v1/jobs/j-0000000000", 404),
            ("/v1/sessions/s-0000000000", 404),
            ("/v1/jobs/j-0000000000/result/table", 404),
            ("/v1/jobs/nope", 400),
        ):
            assert http.get(path, headers=auth).status_code == status
        for token in ("garbage", "t-x.1.2", "c-" + "9" * 60 + ".1", "t-0000000000.99999999999999"):
            for kind in ("table", "changelog"):
                answer = http.get(f"/v1/jobs/nope/result/{kind}", params={"token": token}, headers=auth)
                assert 400 <= answer.status_code < 500, (token, answer.text)
        assert http.get("/v1/openapi.json", headers=auth).json()["info"]["title"] == "upsertmat gateway"
    assert list(outside.iterdir()) == []  # nothing written outside the data root
    assert gateway.process is not None and gateway.process.poll() is None  # still serving


OPS_JOB = (
    JOB.replace("name: users", "name: ops")
    .replace("data/users", "data/ops")
    .replace("table: users", "table: ops")
)


def metric_values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a Prometheus text exposition, by (name, labels), read by prometheus-client's
    own parser (what a Prometheus server reads)."""
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def environ_of_child_jvm(pid: int) -> dict[str, str]:
    """The environment of the Java process below ``pid`` (PySpark's driver JVM)."""
    for process in descendants(pid)[1:]:
        try:
            if Path(f"/proc/{process}/cmdline").read_bytes().split(b"\0")[0].endswith(b"java"):
                pairs = Path(f"/proc/{process}/environ").read_bytes().split(b"\0")
                return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)
        except OSError:
            continue
    raise AssertionError(f"no Java process below {pid}")


def test_stop_lets_no_batch_start_then_restart_delete_and_metrics(
    gateway: GatewayProcess, root: Path
) -> None:
    data = generate(DemoShape(users=20, events=160, seed=5))
    arrivals = records(data.arrival)
    files = 12  # enough that a slow client cannot see them all committed before its stop request
    size = -(-len(arrivals) // files)
    source = root / "data" / "ops"
    drop_file(source, "part-00.jsonl", arrivals[:size])
    client = client_of(gateway)
    job = client.submit(client.open_session(), job=OPS_JOB).id
    wait_for(lambda: client.job(job).committed_batch == 0, what="the first batch")
    for number in range(1, files):  # the other files, one batch each
        drop_file(source, f"part-{number:02d}.jsonl", arrivals[number * size : (number + 1) * size])
    wait_for(lambda: (client.job(job).committed_batch or 0) >= 1, what="a second batch")
    with pytest.raises(GatewayError) as running:
        client.delete(job)
    assert running.value.status == 409 and "RUNNING" in running.value.message
    at_stop = client.stop(job).committed_batch
    assert at_stop is not None
    stopped = wait_for(lambda: (s := client.job(job)).state.value == "STOPPED" and s, what="the stop")
    assert (
        stopped.committed_batch is not None and stopped.committed_batch <= at_stop + 1
    )  # only the one running
    assert stopped.committed_batch < files - 1  # files were still waiting: no new batch started

    with httpx.Client(base_url=gateway.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http:
        exposition = http.get("/metrics")
        assert exposition.status_code == 200 and exposition.headers["content-type"].startswith("text/plain")
        assert httpx.get(f"{gateway.url}/metrics", timeout=60).status_code == 401
    values = metric_values(exposition.text)
    label = (("job", job),)
    assert values[("upsertmat_job_batches_total", label)] == stopped.batches >= 2
    assert values[("upsertmat_job_changes_out_total", label)] == stopped.changes
    assert values[("upsertmat_job_changes_in_total", label)] > 0
    assert values[("upsertmat_job_rows", label)] == stopped.rows
    assert values[("upsertmat_job_files_waiting", label)] == files - 1 - stopped.committed_batch
    assert values[("upsertmat_job_batch_seconds_count", label)] == stopped.batches
    assert values[("upsertmat_job_state", (("job", job), ("state", "STOPPED")))] == 1.0
    assert any(name == "upsertmat_gateway_request_seconds_count" for name, _ in values)
    if arena_count() is not None:  # glibc: the gateway bounds its own malloc arenas, not its JVM's
        assert 1 <= values[("upsertmat_gateway_malloc_arenas", ())] <= 2
        assert gateway.process is not None
        jvm = environ_of_child_jvm(gateway.process.pid)
        assert jvm.get("MALLOC_ARENA_MAX") == os.environ.get("MALLOC_ARENA_MAX")  # what it was given

    restarted = client.restart(job)  # on its checkpoint: the rest of the files, each change once
    assert restarted.state.value in ("STARTING", "RUNNING")
    with pytest.raises(GatewayError) as again:
        client.restart(job)
    assert again.value.status == 409
    wait_for(lambda: client.job(job).committed_batch == files - 1, what="the last batch after the restart")
    page = client.table_page(job, page_size=1000)
    assert table_of(page.rows) == expected_table(data.logical)
    changes: list[dict[str, Any]] = []
    token = None
    while True:
        changelog = client.changelog_page(job, token, max_changes=1000)
        changes.extend(change.model_dump() for change in changelog.changes)
        if not changelog.changes:
            break
        token = changelog.next_token
    assert [c["pos"] for c in changes] == list(range(1, len(changes) + 1))
    assert replay(changes) == expected_table(data.logical)

    client.stop(job)
    wait_for(lambda: client.job(job).state.value == "STOPPED", what="the second stop")
    deleted = client.delete(job, ResultsOnDelete.DELETE)
    assert deleted.deleted and deleted.kept_in is None
    with pytest.raises(GatewayError) as gone:
        client.job(job)
    assert gone.value.status == 404
    assert not (root / "jobs" / job).exists()
    client.close()


def test_a_second_gateway_on_the_same_root_is_refused(gateway: GatewayProcess, root: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "upsertmat", "gateway", "--data-root", str(root), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3 and "another gateway uses the data root" in result.stderr


def test_status_page_in_a_headless_browser(gateway: GatewayProcess, tmp_path: Path) -> None:
    missing = [
        what
        for what, present in (
            ("selenium (the dev extra)", importlib.util.find_spec("selenium") is not None),
            ("Debian's chromium", Path("/usr/bin/chromium").exists()),
            ("Debian's chromium-driver", Path("/usr/bin/chromedriver").exists()),
        )
        if not present
    ]
    require(not missing, ", ".join(missing))  # .ci/run installs them
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        with client_of(gateway) as client:
            driver.get(client.login_link())  # a one-time link: the page's cookie
        wait_for(
            lambda: "jobs; refreshed" in driver.find_element(By.ID, "status").text, 30, "the page's refresh"
        )
        text = driver.find_element(By.ID, "jobs").text
        assert "users" in text and "STOPPED" in text and "FAILED" in text
        wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, "#result tbody tr"), 30, "the job's table")
        # the selected job (users: batches after the gateway's restart) plotted: three charts,
        # each a line through every batch of its history (issue 45, item 6)
        with client_of(gateway) as client:
            users = next(job for job in client.jobs() if job.name == "users")
            history = client.history(users.id)
        assert len(history.batches) >= 2, history
        assert all(point.batch_seconds > 0 for point in history.batches)
        assert any(point.changes_per_second > 0 for point in history.batches)
        assert [point.batch for point in history.batches] == sorted(
            {point.batch for point in history.batches}
        )
        wait_for(lambda: len(driver.find_elements(By.CSS_SELECTOR, "#plots polyline")) == 3, 30, "the plots")
        for figure in driver.find_elements(By.CSS_SELECTOR, "#plots figure"):
            metric = figure.get_attribute("data-metric")
            drawn = str(figure.find_element(By.TAG_NAME, "polyline").get_attribute("points") or "").split()
            plotted = [point for point in history.batches if getattr(point, str(metric)) is not None]
            assert len(drawn) == len(plotted) >= 2, (metric, drawn, history)
            assert len({pair for pair in drawn}) > 1, (metric, drawn)  # a line, not one dot
            assert "at the last batch" in figure.find_element(By.TAG_NAME, "figcaption").text
        assert {
            figure.get_attribute("data-metric")
            for figure in driver.find_elements(By.CSS_SELECTOR, "#plots figure")
        } == {
            "changes_per_second",
            "batch_seconds",
            "files_waiting",
        }
        # no asset from outside the process: every resource the page loaded came from the gateway
        urls = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(str(item).startswith(gateway.url) for item in urls), urls
    finally:
        driver.quit()


def test_client_command_and_exit_codes(gateway: GatewayProcess, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["client", "--gateway", gateway.url, "--token", TOKEN]
    assert main([*base, "list", "--format", "json"]) == 0
    jobs = __import__("json").loads(capsys.readouterr().out)
    stopped = next(job["id"] for job in jobs if job["state"] == "STOPPED")
    failed = next(job["id"] for job in jobs if job["state"] == "FAILED")
    assert main([*base, "result", stopped, "--mode", "tableau", "--format", "jsonl"]) == 0  # to end of stream
    lines = capsys.readouterr().out.splitlines()
    assert lines and all(__import__("json").loads(line)["op"] in ("+I", "-U", "+U", "-D") for line in lines)
    assert main([*base, "result", failed, "--mode", "tableau"]) == 1
    assert "FAILED" in capsys.readouterr().err
    assert main([*base, "status", "j-0000000000"]) == 2
    assert "404" in capsys.readouterr().err
    assert main(["client", "--gateway", gateway.url, "list"]) == 2  # no token
    assert main(["client", "--gateway", "http://127.0.0.1:9", "list"]) == 4  # nothing listens
    assert main(["client", "--gateway", "not a url", "list"]) == 2
    assert "not a gateway URL" in capsys.readouterr().err
    assert main(["client", "--data-root", str(gateway.root), "--token", TOKEN, "status", stopped]) == 0
    status = __import__("json").loads(capsys.readouterr().out)
    assert status["id"] == stopped and status["created"].endswith("Z")  # RFC 3339 times, not epoch floats
    assert main(["client", "--data-root", str(gateway.root), "--token", TOKEN, "stop", stopped]) == 0
    assert capsys.readouterr().out == f"{stopped} STOPPED\n"  # one line


def test_schemathesis_all_checks_against_the_running_gateway(gateway: GatewayProcess, tmp_path: Path) -> None:
    """Schemathesis (``--checks all``: status codes, content types, response schemas, positive
    and negative data, 405 with Allow, auth ignored, use after free, ...) on the live schema.
    Last before the gateway stops: its stateful phase follows links to the jobs the tests left
    (restarts, stops and deletes them)."""
    command = [
        str(Path(sys.executable).parent / "schemathesis"),
        "--config-file",
        str(Path(__file__).parent / "schemathesis.toml"),
        "run",
        f"{gateway.url}/v1/openapi.json",
        "--checks",
        "all",
        "-H",
        f"Authorization: Bearer {TOKEN}",
        "--max-examples",
        "15",
        "--seed",
        "31",
        "--no-color",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failure" not in result.stdout.split("SUMMARY")[-1].lower()


def test_sigterm_stops_the_gateway_with_143(gateway: GatewayProcess) -> None:
    assert gateway.terminate() == 143
    assert not (gateway.root / "gateway.json").exists()


def test_a_bind_off_loopback_needs_a_token(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "upsertmat", "gateway", "--data-root", str(tmp_path), "--host", "0.0.0.0"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 2 and "without a token" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
