"""One rule for text that is not text: in every text format (JSON Lines, CSV, Debezium, Canal,
Maxwell), a line with bytes that are not UTF-8 is a bad row named by file and line. on-error
fail stops before the batch commits (BadInput; `upsertmat run` exit 1, one line); on-error skip
writes it to the dead-letter directory with its bytes (base64) and goes on. No value of the sink
ever holds a U+FFFD that was not in the input. And a CSV quote that does not close on its line is
a bad row, not a value."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from upsertmat.spark.pipeline import read_table, run_pipeline
from upsertmat.spark.sources.badinput import BadInput

from .envelopes import WRITERS, debezium_lines
from .test_bad_input import config_of, dead_letters, place

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = [("+I", {"id": 1, "v": "a"}), ("+I", {"id": 2, "v": "BAD"}), ("+I", {"id": 3, "v": "c\ufffd"})]
"""Three inserts; the second one's value gets a byte that is not UTF-8 (``\\xff``) in place of
``BAD``; the third holds a real U+FFFD (valid UTF-8: it stays)."""


def plain_lines(fmt: str) -> list[str]:
    if fmt == "jsonl":
        return [
            json.dumps({"seq": seq, "op": op, **row}, ensure_ascii=False)
            for seq, (op, row) in enumerate(ROWS)
        ]
    if fmt == "csv":  # in the order of the source's DDL: op, seq, then the row
        return ["op,seq,id,v"] + [f"{op},{seq},{row['id']},{row['v']}" for seq, (op, row) in enumerate(ROWS)]
    # one envelope per change (Canal would put the three inserts in one message)
    return [line for change in ROWS for line in WRITERS[fmt]([change])]


def with_bad_byte(lines: list[str]) -> tuple[bytes, int, bytes]:
    """The file's bytes, the 1-based number of the line holding the bad byte, and that line."""
    data = b"".join(line.encode() + b"\n" for line in lines)
    number = next(index for index, line in enumerate(lines, start=1) if "BAD" in line)
    bad_line = lines[number - 1].encode().replace(b"BAD", b"B\xffD")
    return data.replace(b"BAD", b"B\xffD"), number, bad_line


FORMATS = ["jsonl", "csv", "debezium-json", "canal-json", "maxwell-json"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_invalid_utf8_is_a_bad_row_named_by_file_and_line(
    spark: SparkSession, tmp_path: Path, fmt: str
) -> None:
    lines = plain_lines(fmt)
    data, number, bad_line = with_bad_byte(lines)
    path = place(tmp_path / "in", f"a.{fmt}", data, 0)
    byte = bad_line.index(b"\xff") + 1
    with pytest.raises(BadInput) as failed:
        run_pipeline(config_of(tmp_path, fmt), spark)
    message = str(failed.value)
    assert "\n" not in message
    assert (
        f"bad input in micro-batch 0: {path} line {number}: not valid UTF-8 (byte {byte} of the line)"
        in message
    )
    [row] = failed.value.rows
    assert (row.file, row.line, row.reason) == (
        str(path),
        number,
        f"not valid UTF-8 (byte {byte} of the line)",
    )

    skipping = config_of(tmp_path, fmt, "skip")
    result = run_pipeline(skipping, spark)
    assert result.bad_rows == 1
    assert read_table(skipping, spark) == [(1, "a"), (3, "c\ufffd")]  # the real U+FFFD kept
    [letter] = dead_letters(skipping)
    assert (letter["file"], letter["line"], letter["error"]) == (str(path), number, row.reason)
    assert base64.b64decode(letter["bytes"]) == bad_line  # the raw line, recoverable exactly
    assert "\ufffd" not in letter["text"] and "\\xff" in letter["text"]


def test_an_unbalanced_csv_quote_is_a_bad_row(spark: SparkSession, tmp_path: Path) -> None:
    text = 'op,seq,id,v\n+I,0,1,a\n+I,1,2,"abc\n+I,2,3,"c,d"\n+I,3,4,"say ""hi"""\n+I,4,5,x"y\n'
    path = place(tmp_path / "in", "a.csv", text.encode(), 0)
    with pytest.raises(BadInput, match=f"micro-batch 0: {path} line 3: unbalanced quote"):
        run_pipeline(config_of(tmp_path, "csv"), spark)
    skipping = config_of(tmp_path, "csv", "skip")
    assert run_pipeline(skipping, spark).bad_rows == 1
    # quotes that pair up are read as Spark's CSV parser reads them (escape: backslash)
    assert read_table(skipping, spark) == [(1, "a"), (3, "c,d"), (4, '"say ""hi"""'), (5, 'x"y')]
    [letter] = dead_letters(skipping)
    assert (letter["line"], letter["text"]) == (3, '+I,1,2,"abc')
    assert letter["error"].startswith("unbalanced quote: the quoted field at column 8 does not end")


def test_run_exits_1_for_a_cdc_file_with_invalid_utf8(tmp_path: Path) -> None:
    data, number, _ = with_bad_byte(debezium_lines(ROWS))
    place(tmp_path / "in", "a.json", data, 0)
    job = tmp_path / "job.yaml"
    job.write_text(
        "name: bad\nsource: {path: in, format: debezium-json, columns: [{id: long}, {v: string}]}\n"
        "keys: {primary-key: [id]}\n"
    )
    done = subprocess.run(
        [str(Path(sys.executable).parent / "upsertmat"), "run", str(job)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if "bad input" in line]
    assert len(errors) == 1 and f"a.json line {number}: not valid UTF-8" in errors[0], done.stderr
    assert "Traceback" not in done.stderr and "UnicodeDecodeError" not in done.stderr
