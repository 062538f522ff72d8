"""upsertmat.spark.sources.jsonlines: the JSON line parser gives from_json's row for every line.

Differential: each line goes through ``from_json`` and through the parser in one Spark query,
and the collected rows must be equal value for value (``repr``, so that NaN, -0.0 and the types
count). Lines are generated from a grammar that reaches both of the parser's paths: plain
objects, every type mismatch, numbers and objects in string columns, overflow, duplicate and
unknown keys, non-ASCII and invalid UTF-8, NUL bytes, byte order marks, trailing text, broken
JSON.
"""

from __future__ import annotations

import dataclasses
import json
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession, functions
from pyspark.sql.types import (
    BooleanType,
    ByteType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from upsertmat.spark.config import PipelineConfig
from upsertmat.spark.parts import Column, SinkSpec, SourceSpec
from upsertmat.spark.sources import read_changelog
from upsertmat.spark.sources.formats import SourceFormat
from upsertmat.spark.sources.jsonlines import JSON_LINE_PARSER, json_line_parser, json_line_parser_jar

from .javac import require_javac

pytestmark = pytest.mark.spark

CORRUPT = "_corrupt"
COLUMNS: dict[str, DataType] = {
    "l": LongType(),
    "i": IntegerType(),
    "s": ShortType(),
    "t": ByteType(),
    "b": BooleanType(),
    "d": DoubleType(),
    "str": StringType(),
}
SCHEMA = StructType([StructField(name, kind) for name, kind in [*COLUMNS.items(), (CORRUPT, StringType())]])
OPTIONS = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}

# Lines whose reading once differed or is easy to get wrong (each pinned as an example below).
EDGE_LINES: list[bytes] = [
    b'{"l": 1, "i": 2, "s": 3, "t": 4, "b": true, "d": 1.5, "str": "a"}',
    b'{"str": 1.50}',  # from_json re-serialises a number in a string column: "1.5"
    b'{"str": NaN}',  # ... and a bare NaN as "\\"NaN\\""
    b'{"str": {"x": [1, 2]}, "l": 7}',
    b'{"str": [1,2]}',
    b'{"str": true}',
    b'{"l": 1.0}',
    b'{"l": "7"}',
    b'{"l": ""}',
    b'{"l": 99999999999999999999}',
    b'{"l": -0, "d": -0.0}',
    b'{"l": 1e2}',
    b'{"t": 200}',  # Jackson's getByteValue takes -128..255
    b'{"t": 256}',
    b'{"s": 40000}',
    b'{"i": 2147483648}',
    b'{"d": "NaN"}',
    b'{"d": "-Infinity"}',
    b'{"d": Infinity}',
    b'{"d": 1e400}',
    b'{"b": "true"}',
    b'{"b": 1}',
    b'{"l": 1, "l": 2}',
    b'{"l": 1, "l": null}',
    b'{"l": "x", "l": 2}',
    b'{"L": 1, "extra": {"l": 5}}',
    b'{"_corrupt": "mine", "l": 3}',
    b'[{"l": 1}]',
    b"[]",
    b'"just a string"',
    b"42",
    b"{}",
    b'{"l": 1,}',
    b'{"l": 1',
    b'{"l": 1} trailing',
    b'{"l": 1}{"l": 2}',
    b"{'l': 23, 'str': 'single'}",
    b"{l: 1}",
    b'{"str": "\\u00e9\\ud83d\\ude00"}',
    '{"str": "é😀"}'.encode(),
    b'{"str": "\xff\xfe bad"}',
    b'{"str": "over\xc0\xaflong"}',
    b'{"l": 1.5, "str": "\xed\xa0\x80 surrogate"}',
    b'\xef\xbb\xbf{"l": 97}',
    b'{"str": "nul\x00"}',
    b'{"l": 5, "str": "a\x00"}',
    b'\x00{"l": 1}',
    b'{"str": "tab\there"}',
    b'{"str": "\\n\\"quoted\\""}',
    b'  {"l": 8}  ',
    b'{"l": 9} // comment',
    b'{"l": 00012}',
    b'{"l": +5}',
    b'{"d": .5}',
    b'{"d": 0x10}',
]


def both(spark: SparkSession, lines: Sequence[bytes]) -> tuple[list[str], list[str]]:
    """Each line's row through from_json and through the parser, as ``repr`` strings."""
    parse = json_line_parser(spark, SCHEMA, CORRUPT)
    assert parse is not None
    frame = spark.createDataFrame(
        [(index, bytearray(line)) for index, line in enumerate(lines)], "n int, raw binary"
    )
    text = functions.col("raw").cast("string")
    rows = (
        frame.select(
            "n",
            functions.from_json(text, SCHEMA, OPTIONS).alias("expected"),
            parse(text).alias("got"),
        )
        .orderBy("n")
        .collect()
    )
    return [repr(row.expected) for row in rows], [repr(row.got) for row in rows]


def test_the_jar_is_compiled_once(tmp_path: Path) -> None:
    require_javac()
    jar = json_line_parser_jar(tmp_path)
    assert jar is not None and jar.parent == tmp_path
    with zipfile.ZipFile(jar) as archive:
        assert archive.namelist() == [JSON_LINE_PARSER.replace(".", "/") + ".class"]
    assert json_line_parser_jar(tmp_path) == jar
    assert [path.name for path in tmp_path.iterdir()] == [jar.name]


def test_the_session_has_the_parser(spark: SparkSession) -> None:
    require_javac()
    assert json_line_parser(spark, SCHEMA, CORRUPT) is not None


def test_a_column_type_it_does_not_read_leaves_from_json(spark: SparkSession) -> None:
    require_javac()
    for kind in ["timestamp", "decimal(10,2)", "float", "date", "array<bigint>", "binary"]:
        schema = StructType.fromDDL(f"x {kind}, {CORRUPT} string")
        assert isinstance(schema, StructType)
        assert json_line_parser(spark, schema, CORRUPT) is None, kind


def test_every_edge_line_reads_as_from_json_reads_it(spark: SparkSession) -> None:
    require_javac()
    expected, got = both(spark, EDGE_LINES)
    for line, want, have in zip(EDGE_LINES, expected, got, strict=True):
        assert have == want, line


def test_a_plain_line_reads_every_supported_type(spark: SparkSession) -> None:
    require_javac()
    _, got = both(spark, [EDGE_LINES[0], b'{"l": -9223372036854775808, "t": -128, "d": -0.0}'])
    assert got == [
        "Row(l=1, i=2, s=3, t=4, b=True, d=1.5, str='a', _corrupt=None)",
        "Row(l=-9223372036854775808, i=None, s=None, t=-128, b=None, d=-0.0, str=None, _corrupt=None)",
    ]


def json_values() -> st.SearchStrategy[Any]:
    """JSON values of every kind, nested a little."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.sampled_from([-129, 128, 255, 256, -32769, 32768, 2**31, 2**63, -(2**63) - 1]),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=8),
        st.sampled_from(["", "NaN", "Infinity", "-INF", "7", "true"]),
    )
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=4,
    )


# Value texts json.dumps never writes but Jackson with Spark's options may read.
ODD_NUMBERS = ["NaN", "Infinity", "-Infinity", "1.50", "-0", "-0.0", "1e2", "1E-2", "0.0", "1e400"]
ODD_TOKENS = [*ODD_NUMBERS, "'q'", "00", "+1", ".5", "tru", "nul"]


def right_value(name: str) -> st.SearchStrategy[str]:
    """Texts of a value of the JSON type column ``name`` reads (all of them plain)."""
    bits = {"l": 64, "i": 32, "s": 16, "t": 8}
    if name in bits:
        top = 2 ** (bits[name] - 1)
        return st.integers(min_value=-top, max_value=top - 1).map(str)
    if name == "b":
        return st.sampled_from(["true", "false"])
    if name == "d":
        finite = st.floats(allow_nan=False, allow_infinity=False).map(json.dumps)
        return st.one_of(finite, st.integers().map(str), st.sampled_from(ODD_NUMBERS))
    return st.one_of(
        st.text(max_size=10).map(json.dumps),
        st.text(max_size=10).map(lambda text: json.dumps(text, ensure_ascii=False)),
    )


def any_value() -> st.SearchStrategy[str]:
    """Texts of any value: any JSON, or a token only Jackson's lenient options might read."""
    return st.one_of(json_values().map(json.dumps), st.sampled_from(ODD_TOKENS))


@st.composite
def json_lines(draw: st.DrawFn) -> bytes:
    """One line: mostly a plain object over the schema's columns (each value of its column's type
    seven times in eight), with unknown and repeated keys, sometimes reshaped or damaged."""
    keys = draw(st.lists(st.sampled_from([*COLUMNS, *COLUMNS, CORRUPT, "x", "L"]), max_size=8))
    members = []
    for key in keys:
        if key not in COLUMNS:  # skipped, whatever JSON it holds
            value = draw(json_values().map(json.dumps))
        elif draw(st.integers(min_value=0, max_value=7)) > 0:
            value = draw(right_value(key))
        else:
            value = draw(any_value())
        members.append((key, value))
    separator = draw(st.sampled_from([", ", ",", " , "]))
    text = "{" + separator.join(f"{json.dumps(key)}: {value}" for key, value in members) + "}"
    shape = draw(st.sampled_from(["object"] * 12 + ["array", "trailing", "cut", "spaced"]))
    text = {"array": f"[{text}]", "trailing": text + " x", "cut": text[:-1], "spaced": f"  {text} "}.get(
        shape, text
    )
    line = text.encode("utf-8", "surrogatepass")
    damage = draw(st.sampled_from([None] * 15 + ["byte", "bom", "nul"]))
    if damage == "byte":
        at = draw(st.integers(min_value=0, max_value=len(line)))
        line = (
            line[:at]
            + draw(st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82"]))
            + line[at:]
        )
    elif damage == "bom":
        line = b"\xef\xbb\xbf" + line
    elif damage == "nul":
        at = draw(st.integers(min_value=0, max_value=len(line)))
        line = line[:at] + b"\x00" + line[at:]
    return line


@settings(
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@example(lines=EDGE_LINES)
@given(lines=st.lists(json_lines(), min_size=1, max_size=60))
def test_generated_lines_read_as_from_json_reads_them(spark: SparkSession, lines: list[bytes]) -> None:
    require_javac()
    expected, got = both(spark, lines)
    assert got == expected


def test_the_pipeline_source_uses_it(spark: SparkSession, tmp_path: Path) -> None:
    require_javac()
    source = tmp_path / "source"
    source.mkdir()
    config = PipelineConfig(
        source=SourceSpec(source, SourceFormat.JSONL, (Column("id", "long"), Column("v", "string"))),
        sink=SinkSpec(f"sqlite:///{tmp_path / 'sink.db'}", "sink"),
        primary_key=("id",),
        checkpoint=tmp_path / "checkpoint",
    )
    assert "upsertmat_json_" in plan(read_changelog(spark, config))
    assert "from_json" not in plan(read_changelog(spark, config))
    at = (Column("id", "long"), Column("at", "timestamp"))  # a type the Java parser leaves to from_json
    timed = dataclasses.replace(config, source=dataclasses.replace(config.source, columns=at))
    assert "from_json" in plan(read_changelog(spark, timed))


def plan(frame: DataFrame) -> str:
    """The analysed plan of ``frame``, as text."""
    return str(frame._jdf.queryExecution().analyzed().toString())
