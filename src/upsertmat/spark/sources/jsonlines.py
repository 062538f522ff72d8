"""JSON Lines parsed as ``from_json`` parses them, at the speed of Spark's JSON file source.

The pipeline reads JSON Lines as text and parses each line with ``from_json`` (so every bad
line keeps its raw text, :mod:`.sources`). ``from_json`` reads each line through a Java
``InputStreamReader`` (a charset decoder and its buffers per line, then Jackson's character
parser), which made the source half of the map stage's time: 1,000,000 lines take ~3 s on two
cores, against ~1.4 s for Spark's JSON file source, which hands Jackson the bytes.
:data:`JSON_LINE_PARSER` (Java source beside this module, ``java/upsertmat/json``) is a Java UDF
over the line's bytes that gives the row ``from_json`` gives for every line: it reads a plain
line (one object, each schema field ``null`` or of its column's JSON type) with Jackson's byte
parser and the same Jackson calls Spark's converters make, and hands every other line to
``from_json``'s own parser (its class comment has the rules). Measured: the same 1,000,000 lines
in ~1.4 s.

:func:`json_line_parser` returns the UDF as a column function when it can be used (a JVM this
process started with the jar on its class paths, :func:`~.session.build_session`; every column
``bigint``, ``int``, ``smallint``, ``tinyint``, ``boolean``, ``double`` or ``string``, which the
class itself decides), else None: the caller then uses ``from_json``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import Column, SparkSession, functions
from pyspark.sql.types import StructType

from ..jvm.jars import compiled_jar, java_sources, pyspark_jars

JSON_LINE_PARSER = "upsertmat.json.JsonLineParser"
PACKAGE = "upsertmat.json"
JAR_STEM = "upsertmat-jsonlines"
_LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")


def json_line_parser_jar(directory: Path | None = None) -> Path | None:
    """The jar holding :data:`JSON_LINE_PARSER`, compiled on first use against pyspark's jars;
    None without a usable ``javac`` or when it does not compile against this pyspark (it uses
    Spark's internal JSON parser classes). See :func:`~upsertmat.spark.jvm.jars.compiled_jar`."""
    return compiled_jar(JAR_STEM, java_sources(PACKAGE), pyspark_jars(), directory)


def json_line_parser(
    spark: SparkSession, schema: StructType, corrupt_column: str
) -> Callable[[Column], Column] | None:
    """A function of a string column of JSON lines giving the struct ``from_json(line, schema,
    {mode: PERMISSIVE, columnNameOfCorruptRecord: corrupt_column})`` gives, through
    :data:`JSON_LINE_PARSER`; None when it cannot be used here (see the module docstring).

    ``schema`` includes ``corrupt_column`` (a string column). The UDF is registered in the
    session under a name derived from the schema, so parsers for different schemas coexist.
    """
    if not _available(spark):
        return None
    jvm: Any = spark.sparkContext._jvm
    layout = schema.json()
    try:  # the class refuses a column type it does not read (IllegalArgumentException)
        parser = jvm.upsertmat.json.JsonLineParser(layout, corrupt_column)
        returns = jvm.org.apache.spark.sql.types.DataType.fromJson(layout)
        name = "upsertmat_json_" + hashlib.sha256(f"{layout}\0{corrupt_column}".encode()).hexdigest()[:16]
        spark._jsparkSession.udf().register(name, parser, returns)
    except Exception:  # py4j reports a Java exception as a Py4JJavaError: from_json stays
        return None
    return lambda lines: functions.call_function(name, lines.cast("binary"))


def _available(spark: SparkSession) -> bool:
    """True when the driver loads :data:`JSON_LINE_PARSER` and the executors have its jar: the
    driver is the only JVM (a local master) or the executors' class path names the jar."""
    try:
        jvm: Any = spark.sparkContext._jvm
        jvm.java.lang.Class.forName(JSON_LINE_PARSER)
    except Exception:  # no JVM (Spark Connect) or ClassNotFoundException
        return False
    if _LOCAL_MASTER.fullmatch(spark.sparkContext.master or ""):
        return True
    executors = spark.sparkContext.getConf().get("spark.executor.extraClassPath") or ""
    return JAR_STEM in executors
