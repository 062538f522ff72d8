"""Bad source rows explained and located on the driver, dead letters, and the job-file and URL
shapes of the lakehouse sinks and CDC formats (no Spark)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from upsertmat.jobs.loader import JobError, job_from_document, with_overrides
from upsertmat.jobs.model import SourceFormat
from upsertmat.plan.codec import parse_plan, plan_to_json
from upsertmat.plan.compiler import compile_job, job_of_plan
from upsertmat.sinks import SinkUrlError, resolve_url
from upsertmat.sinks.delta import delta_location
from upsertmat.sinks.iceberg import iceberg_warehouse
from upsertmat.sinks.sqlite import sqlite_path
from upsertmat.spark.sources.badinput import BadInput, BadRow, DeadLetters, SourceShape, locate, split_bad

SHAPE = SourceShape(
    "json", {"seq": "bigint", "op": "string", "id": "bigint", "v": "string"}, "op", "seq", ("id",)
)
CSV = SourceShape("csv", SHAPE.types, "op", "seq", ("id",))


def test_reasons_name_what_is_wrong() -> None:
    assert (
        SHAPE.reason({"code": "corrupt", "text": '{"seq": 1, "id": true}'})
        == "column 'id' must be a long, got a boolean (true)"
    )
    assert SHAPE.reason({"code": "corrupt", "text": "[1]"}) == "expected a JSON object, got an array"
    assert SHAPE.reason({"code": "corrupt", "text": '{"seq": 99999999999999999999}'}) == (
        "column 'seq' must be a long, got 99999999999999999999 (out of range)"
    )
    assert SHAPE.reason({"code": "no-op"}) == "no op: the column 'op' is missing or null"
    assert SHAPE.reason({"code": "no-key", "column": "id"}) == (
        "no key: the sink primary key column 'id' is missing or null"
    )
    assert CSV.reason({"code": "corrupt", "text": '1,"+I",2'}) == "3 field(s), expected 4 (seq, op, id, v)"
    assert CSV.reason({"code": "corrupt", "text": "1,+I,2.5,x"}) == "column 'id' must be a long, got '2.5'"


def test_locate_finds_each_line_once_in_file_order(tmp_path: Path) -> None:
    path = tmp_path / "a.json"
    path.write_bytes(b'{"ok": 1}\r\nbad\r\n{"ok": 2}\r\nbad\r\n')
    infos = [{"code": "corrupt", "file": path.as_uri(), "text": "bad"} for _ in range(2)]
    rows = locate(infos, SHAPE)
    assert [(row.file, row.line) for row in rows] == [(str(path), 2), (str(path), 4)]
    csv_path = tmp_path / "a.csv"
    csv_path.write_text("seq,op,id,v\n1,+I,1,a\n2,XX,2,b\n")
    found = locate([{"code": "unknown-op", "file": str(csv_path), "op": "XX", "order": "2"}], CSV)
    assert found[0].line == 3 and found[0].text is None
    gone = locate([{"code": "corrupt", "file": str(tmp_path / "gone.json"), "text": "x"}], SHAPE)
    assert gone[0].line is None and gone[0].where() == str(tmp_path / "gone.json")


def test_split_bad_takes_marked_rows_out() -> None:
    changes = [(1, "+I", (1,)), (2, '?B{"code":"no-op","file":"f"}', (None,)), (3, "?B", ('{"code":"x"}',))]
    kept, bad = split_bad(changes)
    assert kept == [(1, "+I", (1,))] and bad == [{"code": "no-op", "file": "f"}, {"code": "x"}]


def test_dead_letters_are_rewritten_whole(tmp_path: Path) -> None:
    letters = DeadLetters(tmp_path / "dl")
    rows = [BadRow("f.json", 3, None, "no op", "{}"), BadRow("g.parquet", None, 7, "no key", None)]
    letters.write(4, rows)
    letters.write(4, rows)  # the batch ran again after a crash
    lines = [json.loads(line) for line in letters.path(4).read_text().splitlines()]
    assert lines == [
        {"batch": 4, "file": "f.json", "line": 3, "error": "no op", "text": "{}"},
        {"batch": 4, "file": "g.parquet", "row": 7, "error": "no key"},
    ]
    assert [path.name for path in (tmp_path / "dl").iterdir()] == ["batch-00000004.jsonl"]
    message = str(BadInput(4, rows))
    assert message.startswith("bad input in micro-batch 4: f.json line 3: no op (and 1 more bad row(s)")


def test_lakehouse_urls(tmp_path: Path) -> None:
    assert delta_location("delta:///t.delta", tmp_path) == tmp_path / "t.delta"
    assert delta_location("delta:////abs/t") == Path("/abs/t")
    assert resolve_url("delta:///t", tmp_path) == f"delta:///{tmp_path.resolve() / 't'}"
    assert delta_location(resolve_url("delta:///t", tmp_path)) == tmp_path.resolve() / "t"
    assert iceberg_warehouse(resolve_url("iceberg:///w", tmp_path)) == tmp_path.resolve() / "w"
    assert iceberg_warehouse("iceberg+catalog:prod") is None
    assert resolve_url("iceberg+catalog:prod", tmp_path) == "iceberg+catalog:prod"
    for bad in ("delta://", "delta:relative", "iceberg://"):
        with pytest.raises(SinkUrlError, match="three slashes: relative, four: absolute"):
            resolve_url(bad, tmp_path)
    with pytest.raises(SinkUrlError, match="not a SQLite sink"):
        sqlite_path("delta:///t")


def test_job_files_take_cdc_formats_on_error_and_lakehouse_sinks(tmp_path: Path) -> None:
    document: dict[str, Any] = {
        "name": "cdc",
        "source": {"path": "in", "format": "canal-json", "columns": [{"id": "long"}], "on-error": "skip",
                   "dead-letter": "bad"},
        "keys": {"primary-key": ["id"]},
        "sink": {"url": "delta:///users.delta", "table": "users"},
    }  # fmt: skip
    job = job_from_document(document, base=tmp_path, where="job", output_base=tmp_path)
    assert job.source.format is SourceFormat.CANAL and job.source.on_error == "skip"
    assert job.source.dead_letter == tmp_path / "bad" and job.sink.kind.name == "delta"
    assert job.sink.local_path() == tmp_path.resolve() / "users.delta"
    again = job_of_plan(parse_plan(plan_to_json(compile_job(job))), base=tmp_path, where="plan")
    assert (again.source.on_error, again.source.dead_letter, again.sink.url) == (
        "skip",
        tmp_path / "bad",
        job.sink.url,
    )
    assert with_overrides(job, on_error="fail").source.on_error == "fail"
    source: dict[str, Any] = {**document["source"], "on-error": "ignore"}
    with pytest.raises(JobError, match=r"source\.on-error must be fail or skip, got 'ignore'"):
        job_from_document({**document, "source": source}, base=tmp_path, where="job")


def test_an_open_csv_quote_is_found_alike_in_spark_sql_and_in_python() -> None:
    import random
    import re

    from upsertmat.spark.sources.csvlines import BALANCED, quote_problem

    assert quote_problem('1,+I,2,"abc') == (
        "unbalanced quote: the quoted field at column 8 does not end on its line (a CSV record is one line)"
    )
    for balanced in ['2,+I,3,"c,d"', '3,+I,4,"say ""hi"""', '4,+I,5,x"y', 'a,"b\\"c"', "plain", ""]:
        assert quote_problem(balanced) is None, balanced
    pattern = re.compile(BALANCED)  # the expression rlike runs (Java's syntax: possessive too)
    chance = random.Random(7)
    for _ in range(20_000):
        line = "".join(chance.choice('a,"\\ ') for _ in range(chance.randint(0, 10)))
        assert (pattern.match(line) is not None) == (quote_problem(line) is None), line
    for line in ['a,"' + "x" * 10_000, '"' + '""' * 5_000]:  # linear, no backtracking
        assert pattern.match(line) is None and quote_problem(line) is not None
