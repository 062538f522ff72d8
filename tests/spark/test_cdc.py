"""CDC envelopes to changes, as Flink maps them, and bad envelopes named by line and reason
(upsertmat.spark.sources.cdc; pure Python, no Spark)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from upsertmat.spark.sources.badinput import BAD_OP
from upsertmat.spark.sources.cdc import CdcSpec, EnvelopeError, convert, envelope_changes, file_records

ROW = {"id": 1, "name": "a"}
NEW = {"id": 1, "name": "b"}


def test_debezium() -> None:
    assert envelope_changes("debezium-json", {"op": "c", "before": None, "after": ROW}) == [("+I", ROW)]
    assert envelope_changes("debezium-json", {"op": "r", "after": ROW}) == [("+I", ROW)]
    assert envelope_changes("debezium-json", {"op": "u", "before": ROW, "after": NEW}) == [
        ("-U", ROW),
        ("+U", NEW),
    ]
    assert envelope_changes("debezium-json", {"op": "d", "before": ROW, "after": None}) == [("-D", ROW)]
    wrapped = {"schema": {"type": "struct"}, "payload": {"op": "u", "before": ROW, "after": NEW}}
    assert envelope_changes("debezium-json", wrapped) == [("-U", ROW), ("+U", NEW)]
    assert envelope_changes("debezium-json", None) == []  # tombstone
    with pytest.raises(EnvelopeError, match="REPLICA IDENTITY FULL"):
        envelope_changes("debezium-json", {"op": "u", "before": None, "after": NEW})
    with pytest.raises(EnvelopeError, match="unknown Debezium op 't'"):
        envelope_changes("debezium-json", {"op": "t"})


def test_canal() -> None:
    rows = [ROW, {"id": 2, "name": "x"}]
    assert envelope_changes("canal-json", {"type": "INSERT", "data": rows}) == [("+I", ROW), ("+I", rows[1])]
    update = {"type": "UPDATE", "data": [NEW], "old": [{"name": "a"}]}
    assert envelope_changes("canal-json", update) == [("-U", ROW), ("+U", NEW)]
    assert envelope_changes("canal-json", {"type": "DELETE", "data": [ROW]}) == [("-D", ROW)]
    assert envelope_changes("canal-json", {"type": "CREATE", "isDdl": True, "sql": "create table t"}) == []
    with pytest.raises(EnvelopeError, match="'old' has 0 entries, 'data' 1"):
        envelope_changes("canal-json", {"type": "UPDATE", "data": [NEW], "old": []})


def test_maxwell() -> None:
    assert envelope_changes("maxwell-json", {"type": "insert", "data": ROW}) == [("+I", ROW)]
    update = {"type": "update", "data": NEW, "old": {"name": "a"}}
    assert envelope_changes("maxwell-json", update) == [("-U", ROW), ("+U", NEW)]
    assert envelope_changes("maxwell-json", {"type": "delete", "data": ROW}) == [("-D", ROW)]
    with pytest.raises(EnvelopeError, match="unknown Maxwell type 'bootstrap-start'"):
        envelope_changes("maxwell-json", {"type": "bootstrap-start"})


@pytest.mark.parametrize(
    ("kind", "value", "expected"),
    [
        ("bigint", "7", 7),
        ("bigint", 7, 7),
        ("bigint", 7.0, 7),
        ("int", " -3 ", -3),
        ("double", "1.5", 1.5),
        ("double", 2, 2.0),
        ("boolean", "TRUE", True),
        ("boolean", False, False),
        ("string", 5, "5"),
        ("string", {"a": [1]}, '{"a":[1]}'),
        ("string", None, None),
    ],
)
def test_values_read_as_flink_reads_them(kind: str, value: Any, expected: Any) -> None:
    assert convert(kind, value) == expected


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        ("bigint", 1.5, "a fraction"),
        ("bigint", "1e3", "not an integer"),
        ("int", 2**31, "out of range"),
        ("bigint", True, "a boolean"),
        ("boolean", "1", "not a boolean"),
        ("double", "x", "not a number"),
    ],
)
def test_values_that_cannot_be_read(kind: str, value: Any, message: str) -> None:
    with pytest.raises(EnvelopeError, match=message):
        convert(kind, value)


def test_file_records_number_lines_and_mark_bad_envelopes() -> None:
    spec = CdcSpec("maxwell-json", (("id", "bigint"), ("name", "string")), "op", "seq", ("id",))
    lines = [
        json.dumps({"type": "insert", "data": ROW}),
        "",
        "{not json",
        json.dumps({"type": "update", "data": NEW, "old": {"name": "a"}}),
        json.dumps({"type": "insert", "data": {"name": "no key"}}),
        json.dumps({"type": "insert", "data": {"id": "x1", "name": "c"}}),
    ]
    records = file_records(spec, "file:///data/m.json", "\r\n".join(lines).encode())
    good = [record for record in records if not record[0].startswith(BAD_OP)]
    assert good == [("+I", 1 << 16, 1, "a"), ("-U", 4 << 16, 1, "a"), ("+U", (4 << 16) | 1, 1, "b")]
    bad = [json.loads(record[0][len(BAD_OP) :]) for record in records if record[0].startswith(BAD_OP)]
    assert [(item["file"], item["line"]) for item in bad] == [
        ("/data/m.json", 3),
        ("/data/m.json", 5),
        ("/data/m.json", 6),
    ]
    assert bad[0]["reason"].startswith("invalid JSON")
    assert "primary key column 'id' is missing or null" in bad[1]["reason"]
    assert bad[2]["reason"] == "column 'id': not an integer: 'x1'"
    assert bad[2]["text"] == lines[5]
