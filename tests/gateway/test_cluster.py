"""The gateway's Spark session on a real standalone cluster (master + worker on 127.0.0.1): a job
submitted over the API runs on the cluster's executors and its table equals the model."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from upsertmat.client.http import GatewayClient
from upsertmat.demo.tables import expected_table
from upsertmat.demo.workload import DemoShape, generate

from ..spark.cluster import standalone_cluster
from ..spark.test_cluster import applications
from .process import GatewayProcess, drop_file, records

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = """\
name: on-cluster
source: {path: data/users, columns: [{id: long}, {level: long}, {badge: string}]}
keys: {primary-key: [id]}
sink: {internal: true, table: users}
spark: {key-buckets: 8}
"""


def test_gateway_runs_its_jobs_on_a_standalone_cluster(tmp_path: Path) -> None:
    data = generate(DemoShape(users=20, events=120, seed=3))
    root = tmp_path / "root"
    drop_file(root / "data" / "users", "part-00.jsonl", records(data.arrival))
    with standalone_cluster(tmp_path / "cluster") as (master, web_port):
        gateway = GatewayProcess(root, extra=["--master", master])
        try:
            gateway.start()
            with GatewayClient(gateway.url, timeout=60) as client:
                assert client.info().master == master
                job = client.submit(client.open_session(), job=JOB).id
                deadline = time.monotonic() + 240
                while client.job(job).committed_batch is None:
                    assert client.job(job).state.value != "FAILED", client.job(job).error
                    assert time.monotonic() < deadline, "no batch committed on the cluster"
                    time.sleep(0.5)
                page = client.table_page(job, page_size=1000)
                assert {row[0]: tuple(row) for row in page.rows} == expected_table(data.logical)
                assert applications(web_port) == 1  # the gateway's session is the cluster's application
            assert gateway.terminate() == 143
        finally:
            gateway.close()
