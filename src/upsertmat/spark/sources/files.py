"""How Spark reads each kind of source file (:data:`READERS`, keyed by the table's
:class:`~.formats.Reader`), with every row that cannot be a change marked.

Bad rows (:mod:`.badinput`) are found here, in Spark SQL before the materializer:
a JSON line Spark cannot read with the declared types, a CSV line it cannot read (both keep their
raw text: JSON Lines are read as text and parsed with ``from_json``, so that every bad line's
text is at hand), a missing or unknown op, a missing order column or sink primary key column.
Such a row's op becomes a bad-row marker carrying its file, its raw text or Parquet row index and
a code; the other columns keep what was read. ``from_json``'s rows come from
:data:`~.jsonlines.JSON_LINE_PARSER` where it can be used (the same rows, twice as fast;
:mod:`.jsonlines`). CDC files are parsed in Python
(:mod:`.cdc`: each file read whole, ``wholetext``, one file per micro-batch),
which marks bad envelopes itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, functions
from pyspark.sql.streaming.readwriter import DataStreamReader
from pyspark.sql.types import StringType, StructField, StructType

from ..config import PipelineConfig, PipelineConfigError
from .badinput import (
    BAD_OP,
    CORRUPT,
    INVALID_UTF8,
    NO_KEY,
    NO_OP,
    NO_ORDER,
    OPS,
    UNBALANCED_QUOTE,
    UNKNOWN_OP,
)
from .cdc import CdcSpec, parse_files
from .csvlines import BALANCED
from .formats import Reader
from .jsonlines import json_line_parser

CORRUPT_COLUMN = "_upsertmat_corrupt"
FILE_COLUMN = "_upsertmat_file"
TEXT_COLUMN = "_upsertmat_text"
ROW_COLUMN = "_upsertmat_row"
LINE_COLUMN = "_upsertmat_line"
PROBLEM_COLUMN = "_upsertmat_problem"  # a CSV line's quote left open
BYTES_COLUMN = "_upsertmat_bytes"


def _reader(spark: SparkSession, config: PipelineConfig) -> DataStreamReader:
    reader = spark.readStream
    if config.spark.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", config.spark.max_files_per_trigger)
    return reader


def _with_corrupt(schema: StructType) -> StructType:
    return StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType(), True)])


def _schema(spark: SparkSession, config: PipelineConfig) -> StructType:
    return spark.createDataFrame([], config.source.ddl()).schema


def _marked(
    config: PipelineConfig,
    schema: StructType,
    frame: DataFrame,
    text: Column,
    row: Column,
    refused: Refused | None = None,
) -> DataFrame:
    names = schema.fieldNames()
    marked = _marked_op(config, names, text, row, refused or Refused())
    return frame.select(
        *[marked.alias(name) if name == config.source.op_column else functions.col(name) for name in names]
    )


def read_lines(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """JSON Lines: the text source, each non-blank line parsed with ``from_json`` (or
    :data:`~.jsonlines.JSON_LINE_PARSER`), its raw text kept for a bad line."""
    schema = _schema(spark, config)
    lines = _reader(spark, config).format("text").load(str(config.source.path))
    lines = lines.select(
        functions.col("value"), functions.col("_metadata.file_path").alias(FILE_COLUMN)
    ).where(functions.trim(functions.col("value")) != "")
    corrupt = _with_corrupt(schema)
    parse = json_line_parser(spark, corrupt, CORRUPT_COLUMN)
    if parse is not None:
        parsed = parse(functions.col("value"))
    else:
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
        parsed = functions.from_json(functions.col("value"), corrupt, options)
    # The text source keeps a line's bytes as they are: one that is not UTF-8 is a bad row with
    # its bytes (Spark would otherwise read each invalid byte as U+FFFD, silently).
    invalid = ~functions.is_valid_utf8(functions.col("value"))
    frame = lines.select(
        functions.col("value").alias(TEXT_COLUMN),
        functions.col(FILE_COLUMN),
        functions.when(invalid, functions.base64(functions.col("value").cast("binary"))).alias(BYTES_COLUMN),
        parsed.alias("r"),
    ).select(TEXT_COLUMN, FILE_COLUMN, BYTES_COLUMN, "r.*")
    refused = Refused(
        code=functions.when(functions.col(BYTES_COLUMN).isNotNull(), functions.lit(INVALID_UTF8)),
        raw=functions.col(BYTES_COLUMN),
    )
    return _marked(
        config, schema, frame, functions.col(TEXT_COLUMN), functions.lit(None).cast("long"), refused
    )


def read_csv(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """CSV with a header line: Spark's CSV source hands over each data line whole and as its bytes
    (one string column, no delimiter or quote, read as ISO-8859-1: one character per byte), so
    that a line that is not UTF-8 or leaves a quote open (:mod:`.csvlines`) is a bad row; every
    other line is parsed by Spark's CSV parser (``from_csv``), a line it cannot read kept as its
    raw text. The header and blank lines are dropped by the source as before."""
    schema = _schema(spark, config)
    whole = StructType(
        [StructField(LINE_COLUMN, StringType(), True), StructField(CORRUPT_COLUMN, StringType(), True)]
    )
    lines = (
        _reader(spark, config)
        .schema(whole)
        .option("header", "true")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .option("encoding", "ISO-8859-1")
        .option("sep", "\u0000")
        .option("quote", "")
        .format("csv")
        .load(str(config.source.path))
    )
    raw = functions.encode(
        functions.coalesce(functions.col(CORRUPT_COLUMN), functions.col(LINE_COLUMN)), "ISO-8859-1"
    )
    text = raw.cast("string")  # the bytes as they are (Spark does not check a cast's UTF-8)
    invalid = ~functions.is_valid_utf8(text)
    corrupt = _with_corrupt(schema)
    ddl = ", ".join(f"`{item.name.replace('`', '``')}` {item.dataType.simpleString()}" for item in corrupt)
    options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    frame = lines.select(
        text.alias(TEXT_COLUMN),
        functions.col("_metadata.file_path").alias(FILE_COLUMN),
        functions.when(invalid, functions.base64(raw)).alias(BYTES_COLUMN),
        functions.when(
            ~invalid & text.contains('"') & ~text.rlike(BALANCED), functions.lit(UNBALANCED_QUOTE)
        ).alias(PROBLEM_COLUMN),
        functions.from_csv(text, ddl, options).alias("r"),
    ).select(TEXT_COLUMN, FILE_COLUMN, BYTES_COLUMN, PROBLEM_COLUMN, "r.*")
    bytes_column = functions.col(BYTES_COLUMN)
    refused = Refused(
        code=functions.when(bytes_column.isNotNull(), functions.lit(INVALID_UTF8)).otherwise(
            functions.col(PROBLEM_COLUMN)
        ),
        raw=bytes_column,
    )
    return _marked(
        config, schema, frame, functions.col(TEXT_COLUMN), functions.lit(None).cast("long"), refused
    )


def read_parquet(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """Parquet with the job's schema; a bad row is named by its row index in its file."""
    schema = _schema(spark, config)
    frame = _reader(spark, config).schema(schema).format("parquet").load(str(config.source.path))
    frame = frame.select(
        "*",
        functions.col("_metadata.file_path").alias(FILE_COLUMN),
        functions.col("_metadata.row_index").alias(ROW_COLUMN),
    ).withColumn(CORRUPT_COLUMN, functions.lit(None).cast("string"))
    return _marked(config, schema, frame, functions.lit(None).cast("string"), functions.col(ROW_COLUMN))


@dataclass(frozen=True)
class Refused:
    """What a reader found wrong with a line before parsing it (each a column; null: nothing):
    ``code`` (:data:`~.badinput.INVALID_UTF8`, :data:`~.badinput.UNBALANCED_QUOTE`) and the
    line's ``raw`` bytes (base64) when they are not UTF-8."""

    code: Column = field(default_factory=lambda: functions.lit(None).cast("string"))
    raw: Column = field(default_factory=lambda: functions.lit(None).cast("string"))


def _marked_op(
    config: PipelineConfig, names: list[str], text: Column, row: Column, refused: Refused
) -> Column:
    """The op column, or for a bad row the marker: ``?B`` + JSON (code, file, text, row, op,
    order, column, bytes). One CASE per row; the JSON is built for bad rows only. A line
    the reader refused (``refused.code``) is bad whatever was parsed from it."""
    op = functions.col(config.source.op_column)
    order = functions.col(config.source.order_column)
    code = functions.when(refused.code.isNotNull(), refused.code)
    code = code.when(functions.col(CORRUPT_COLUMN).isNotNull(), functions.lit(CORRUPT))
    code = code.when(op.isNull(), functions.lit(NO_OP))
    code = code.when(~op.isin(*OPS), functions.lit(UNKNOWN_OP))
    code = code.when(order.isNull(), functions.lit(NO_ORDER))
    column: Column = functions.lit(None).cast("string")
    for key in reversed([name for name in config.primary_key if name in names]):
        column = functions.when(functions.col(key).isNull(), functions.lit(key)).otherwise(column)
    code = code.when(column.isNotNull(), functions.lit(NO_KEY))
    info = functions.to_json(
        functions.struct(
            code.alias("code"),
            functions.col(FILE_COLUMN).alias("file"),
            functions.coalesce(text, functions.col(CORRUPT_COLUMN)).alias("text"),
            row.alias("row"),
            op.alias("op"),
            order.cast("string").alias("order"),
            column.alias("column"),
            refused.raw.alias("bytes"),
        )
    )
    return functions.when(code.isNull(), op).otherwise(functions.concat(functions.lit(BAD_OP), info))


def cdc_spec(config: PipelineConfig, types: dict[str, str]) -> CdcSpec:
    """The parser's spec for a CDC config (``types``: its DDL's ``name -> simple type``)."""
    if config.source.ts_column is not None:
        raise PipelineConfigError(f"a {config.source.format.title} source has no ts column (event time)")
    columns = config.source.column_names
    if config.spark.max_files_per_trigger not in (None, 1):
        raise PipelineConfigError(
            f"a {config.source.format.title} source reads one file per micro-batch (its arrival order is the "
            f"line order of a file); spark.max_files_per_trigger must be 1, got "
            f"{config.spark.max_files_per_trigger}"
        )
    return CdcSpec(
        format=config.source.format.value,
        columns=tuple((name, types[name]) for name in columns),
        op_column=config.source.op_column,
        arrival_column=config.source.order_column,
        pk=tuple(config.primary_key),
    )


def read_envelopes(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """CDC envelopes: each file read whole (one per micro-batch) and mapped to changes in Python
    (:func:`~.cdc.parse_files`), which marks bad envelopes itself."""
    schema = _schema(spark, config)
    types = {item.name: item.dataType.simpleString() for item in schema}
    spec = cdc_spec(config, types)
    files = (
        spark.readStream.format("text")
        .option("wholetext", "true")
        .option("maxFilesPerTrigger", 1)
        .load(str(config.source.path))
    )
    files = files.select(
        functions.col("_metadata.file_path").alias("path"),
        functions.col("value").cast("binary").alias("content"),  # the file's bytes, as they are
    )
    parsed = files.mapInArrow(functools.partial(parse_files, spec), spec.output_ddl())
    return parsed.select(*[functions.col(name) for name in schema.fieldNames()])


READERS: dict[Reader, Callable[[SparkSession, PipelineConfig], DataFrame]] = {
    Reader.LINES: read_lines,
    Reader.CSV: read_csv,
    Reader.PARQUET: read_parquet,
    Reader.ENVELOPES: read_envelopes,
}
"""How Spark reads each kind of file of the table (:class:`~.formats.Reader`)."""
