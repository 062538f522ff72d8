"""The gateway's service without Spark or HTTP: path confinement, changelog cursors and tokens,
submitted documents, results read from a sink, strict API JSON, compiled plans with their
layers, sessions. Real SQLite files (the stop signals: tests/cli/test_interrupt.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from upsertmat.gateway.confine import OutsideRoot, confine
from upsertmat.gateway.errors import Refusal
from upsertmat.gateway.lifecycle import Event
from upsertmat.gateway.paging import split_token
from upsertmat.gateway.registry import Registry
from upsertmat.gateway.routes.errors import status_of
from upsertmat.gateway.runtime import concise
from upsertmat.gateway.settings import GatewaySettings, is_loopback
from upsertmat.sinks import Column, open_sink

COLUMNS = (Column("id", "bigint"), Column("v", "string"), Column("x", "double"))


def test_paths_are_confined_to_the_root_through_symlinks(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "data").mkdir(parents=True)
    outside.mkdir()
    (root / "data" / "link").symlink_to(outside)
    assert confine(root / "data" / "x", root, "p") == root / "data" / "x"
    for path in (root / ".." / "outside", outside, root / "data" / "link", root / "data" / "link" / "x.db"):
        with pytest.raises(OutsideRoot):
            confine(path, root, "p")


def test_changelog_cursors_keep_the_current_and_the_previous_page(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    cursor = registry.add_cursor("j-1", 0, max_cursors=2)
    assert registry.cursor(cursor) == ("j-1", 0) and registry.cursor_page(cursor, 0) == (0, None)
    assert registry.serve_page(cursor, 0, 5, b"page 0") == b"page 0"
    assert registry.serve_page(cursor, 0, 7, b"again") == b"page 0"  # served already: the stored body
    assert registry.serve_page(cursor, 1, 9, b"page 1") == b"page 1"
    assert registry.cursor(cursor) == ("j-1", 2)
    assert registry.cursor_page(cursor, 1) == (5, b"page 1")  # the previous page, for a retry
    assert registry.cursor_page(cursor, 2) == (9, None)  # the current one
    assert registry.cursor_page(cursor, 0) is None  # older pages are forgotten
    second = registry.add_cursor("j-1", 0, max_cursors=2)
    third = registry.add_cursor("j-1", 0, max_cursors=2)  # over the bound: the least recently used goes
    assert registry.cursor(cursor) is None and registry.cursor_count() == 2
    assert registry.expire_cursors(before=0) == 0 and registry.expire_cursors(before=2e12) == 2
    assert registry.cursor(second) is None and registry.cursor(third) is None
    registry.close()


def test_tokens_and_failures_are_named() -> None:
    assert split_token("c-0123456789.12", "c-") == ("c-0123456789", 12)
    for token in (
        "c-abc",
        "t-0123456789.1",
        "c-0123456789.x",
        "c-0123456789.-1",
        "c-0123456789." + "9" * 20,
        "c-0123456789.\u00b2",  # a Unicode digit (str.isdigit() is true): issue 31, item 4
        "c-0123456789.\u0661",  # ARABIC-INDIC DIGIT ONE, which int() reads as 1
        "c-0123456789.\uff11",
    ):
        with pytest.raises(Refusal) as refused:
            split_token(token, "c-")
        assert status_of(refused.value) == 400
    wrapped = RuntimeError(
        "[STREAM_FAILED] Query terminated with exception: org.apache.spark.SparkException: Job aborted.\n"
        "  File \"x.py\", line 3\nKeyError: 'XX'\n\tat org.apache.spark.api.python...\n"
    )
    assert concise(wrapped) == "KeyError: 'XX'"
    assert is_loopback("127.0.0.1") and is_loopback("::1") and not is_loopback("0.0.0.0")
    assert not GatewaySettings(Path("r"), host="10.1.2.3").loopback


def test_submitted_yaml_refuses_aliases_and_deep_nesting() -> None:
    from upsertmat.gateway.documents import load_submitted

    assert load_submitted("name: a\nkeys: {primary-key: [id]}\n") == {
        "name": "a",
        "keys": {"primary-key": ["id"]},
    }
    bomb = "a: &a [x, x]\nb: &b [*a, *a]\nc: [*b, *b]\n"
    for text, words in ((bomb, "alias"), ("x: " + "[" * 40 + "]" * 40, "deeper"), ("x: [", "not valid YAML")):
        with pytest.raises(Refusal) as refused:
            load_submitted(text)
        assert status_of(refused.value) == 400 and words in refused.value.message


def test_gateway_results_without_spark(tmp_path: Path) -> None:
    """The service's result rules on a job whose sink a test writes (no query runs)."""
    from upsertmat.gateway.service import Gateway

    gateway = Gateway(GatewaySettings(tmp_path / "root", snapshot_seconds=60))
    (gateway.root / "data" / "src").mkdir(parents=True)
    session = gateway.open_session({"table.exec.state.ttl": "1 h"})
    document = (
        "name: r\nsource: {path: data/src, columns: [{id: long}, {v: string}]}\nkeys: {primary-key: [id]}\n"
    )
    record = gateway.registry.add_job(
        session.id, "r", "job", document, {"session": session.properties}, "j-r"
    )
    job = gateway.resolve(record)
    assert (
        job.sink.url == str(gateway.root / "jobs" / "j-r" / "r.db") and job.settings.ttl.ttl_ms == 3_600_000
    )
    sink = open_sink(job.sink.url, "r", (Column("id", "bigint"), Column("v", "string")), (0,), changelog=True)
    sink.apply_batch("q", 0, [("+I", (number, f"v{number}")) for number in range(5)])

    first = gateway.table_page("j-r", None, 2)
    assert (first.batch, first.pages, first.rows) == (0, 3, [[0, "v0"], [1, "v1"]])
    assert first.next_token is not None
    sink.apply_batch("q", 1, [("-D", (0, "v0"))])
    second = gateway.table_page("j-r", first.next_token, None)
    assert second.batch == 0 and second.rows == [[2, "v2"], [3, "v3"]]  # still batch 0's table
    assert gateway.table_page("j-r", None, 10).batch == 1

    def changelog(token: str | None, size: int, start: str = "beginning") -> Any:
        return json.loads(gateway.changelog_page("j-r", token, size, start))

    page = changelog(None, 4)
    assert [change["pos"] for change in page["changes"]] == [1, 2, 3, 4] and not page["eos"]
    again = changelog(page["token"], 100)  # the retry: the same page, whatever the size
    assert again == page
    rest = changelog(page["next_token"], 100)
    assert [change["op"] for change in rest["changes"]] == ["+I", "-D"]
    with pytest.raises(Refusal) as stale:
        changelog(page["token"], 4)
    assert status_of(stale.value) == 410
    gateway.registry.transition("j-r", Event.STOP)
    gateway.registry.transition("j-r", Event.ENDED)
    end = changelog(rest["next_token"], 4)
    assert end["eos"] and end["changes"] == [] and end["next_token"] is None
    now = changelog(None, 4, start="now")
    assert now["changes"] == [] and now["eos"]

    gateway.registry.expire_snapshots(now=2e12)  # past every snapshot's expiry
    with pytest.raises(Refusal) as expired:
        gateway.table_page("j-r", first.next_token, None)
    assert status_of(expired.value) == 404  # dropped by expiry: the registry no longer knows it
    sink.close()
    gateway.registry.close()


def test_api_json_is_strict_and_keeps_non_finite_floats_as_strings() -> None:
    from upsertmat.gateway.routes.common import PortableJSON

    plain = {"rows": [[1, 1.0, True, None]]}
    assert json.loads(bytes(PortableJSON(plain).body)) == plain
    body = json.loads(bytes(PortableJSON({"rows": [[float("nan"), float("inf"), -float("inf"), -0.0]]}).body))
    assert body == {"rows": [["NaN", "Infinity", "-Infinity", -0.0]]}


def test_gateway_resolves_a_compiled_plan_with_its_layers(tmp_path: Path) -> None:
    from upsertmat.gateway.service import Gateway
    from upsertmat.plan.codec import plan_to_json
    from upsertmat.plan.compiler import compile_job

    gateway = Gateway(GatewaySettings(tmp_path / "root", defaults={"table.exec.state.ttl": "5 s"}))
    (gateway.root / "data" / "src").mkdir(parents=True)
    document = (
        "name: p\nsource: {path: data/src, columns: [{id: long}]}\nkeys: {primary-key: [id]}\n"
        f"sink: {{internal: true}}\ncheckpoint: {gateway.root / 'checkpoints' / 'p'}\n"
    )  # a plan holds absolute paths: its checkpoint must not be in another job's directory
    job_record = gateway.registry.add_job("s-x", "p", "job", document, {}, "j-job")
    job = gateway.resolve(job_record)
    assert job.settings.ttl.ttl_ms == 5000  # the service defaults
    plan = json.dumps(plan_to_json(compile_job(job)))
    layers = {
        "session": {"table.exec.state.ttl": "1 h"},
        "request": {"table.exec.sink.upsert-materialize-strategy.type": "MAP"},
    }
    planned = gateway.resolve(gateway.registry.add_job("s-x", "p", "plan", plan, layers, "j-plan"))
    # the plan's own state TTL (compiled from 5 s) sits above the session; the request on top
    assert planned.settings.ttl.ttl_ms == 5000 and planned.settings.strategy.value == "MAP"
    assert planned.sink.internal and planned.sink.url == str(gateway.root / "jobs" / "j-plan" / "result.db")
    gateway.registry.close()


def test_sessions_are_bounded_configured_and_expire(tmp_path: Path) -> None:
    from upsertmat.gateway.service import Gateway

    gateway = Gateway(GatewaySettings(tmp_path / "root", max_sessions=1, session_idle_seconds=3600))
    session = gateway.open_session({"table": {"exec": {"state": {"ttl": "1 h"}}}})  # nested keys flatten
    assert session.properties == {"table.exec.state.ttl": "1 h"}
    with pytest.raises(Refusal) as full:
        gateway.open_session({})
    assert status_of(full.value) == 429
    configured = gateway.configure_session(
        session.id, {"table.exec.sink.upsert-materialize-strategy.type": "MAP"}
    )
    assert configured.properties["table.exec.sink.upsert-materialize-strategy.type"] == "MAP"
    with pytest.raises(Refusal) as bad:
        gateway.configure_session(session.id, {"table.exec.state.ttl": "5 parsecs"})
    assert status_of(bad.value) == 400 and "table.exec.state.ttl" in bad.value.message
    gateway.expire()
    assert gateway.session(session.id).id == session.id  # used just now
    gateway.settings = GatewaySettings(tmp_path / "root", session_idle_seconds=0)
    gateway.expire()
    with pytest.raises(Refusal) as gone:
        gateway.session(session.id)
    assert status_of(gone.value) == 404
    gateway.registry.close()
