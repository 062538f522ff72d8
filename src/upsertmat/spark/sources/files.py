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

from pyspark.sql import Column, DataFrame, SparkSession, functions
from pyspark.sql.streaming import DataStreamReader
from pyspark.sql.types import StringType, StructField, StructType

from ..config import PipelineConfig, PipelineConfigError
from .badinput import BAD_OP, CORRUPT, NO_KEY, NO_OP, NO_ORDER, OPS, UNKNOWN_OP
from .cdc import CdcSpec, parse_files
from .formats import Reader
from .jsonlines import json_line_parser

CORRUPT_COLUMN = "_upsertmat_corrupt"
FILE_COLUMN = "_upsertmat_file"
TEXT_COLUMN = "_upsertmat_text"
ROW_COLUMN = "_upsertmat_row"


def _reader(spark: SparkSession, config: PipelineConfig) -> DataStreamReader:
    reader = spark.readStream
    if config.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", config.max_files_per_trigger)
    return reader


def _with_corrupt(schema: StructType) -> StructType:
    return StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType(), True)])


def _schema(spark: SparkSession, config: PipelineConfig) -> StructType:
    return spark.createDataFrame([], config.schema).schema


def _marked(
    config: PipelineConfig, schema: StructType, frame: DataFrame, text: Column, row: Column
) -> DataFrame:
    names = schema.fieldNames()
    marked = _marked_op(config, names, text, row)
    return frame.select(
        *[marked.alias(name) if name == config.op_column else functions.col(name) for name in names]
    )


def read_lines(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """JSON Lines: the text source, each non-blank line parsed with ``from_json`` (or
    :data:`~.jsonlines.JSON_LINE_PARSER`), its raw text kept for a bad line."""
    schema = _schema(spark, config)
    lines = _reader(spark, config).format("text").load(str(config.source_path))
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
    frame = lines.select(
        functions.col("value").alias(TEXT_COLUMN), functions.col(FILE_COLUMN), parsed.alias("r")
    ).select(TEXT_COLUMN, FILE_COLUMN, "r.*")
    return _marked(config, schema, frame, functions.col(TEXT_COLUMN), functions.lit(None).cast("long"))


def read_csv(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """CSV with a header line: Spark's CSV source, a line it cannot read kept as its raw text."""
    schema = _schema(spark, config)
    frame = (
        _reader(spark, config)
        .schema(_with_corrupt(schema))
        .option("header", "true")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
        .format("csv")
        .load(str(config.source_path))
    )
    frame = frame.select("*", functions.col("_metadata.file_path").alias(FILE_COLUMN))
    return _marked(config, schema, frame, functions.col(CORRUPT_COLUMN), functions.lit(None).cast("long"))


def read_parquet(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """Parquet with the job's schema; a bad row is named by its row index in its file."""
    schema = _schema(spark, config)
    frame = _reader(spark, config).schema(schema).format("parquet").load(str(config.source_path))
    frame = frame.select(
        "*",
        functions.col("_metadata.file_path").alias(FILE_COLUMN),
        functions.col("_metadata.row_index").alias(ROW_COLUMN),
    ).withColumn(CORRUPT_COLUMN, functions.lit(None).cast("string"))
    return _marked(config, schema, frame, functions.lit(None).cast("string"), functions.col(ROW_COLUMN))


def _marked_op(config: PipelineConfig, names: list[str], text: Column, row: Column) -> Column:
    """The op column, or for a bad row the marker: ``?B`` + JSON (code, file, text, row, op,
    order, column). One CASE per row; the JSON is built for bad rows only."""
    op = functions.col(config.op_column)
    order = functions.col(config.arrival_column)
    code = functions.when(functions.col(CORRUPT_COLUMN).isNotNull(), functions.lit(CORRUPT))
    code = code.when(op.isNull(), functions.lit(NO_OP))
    code = code.when(~op.isin(*OPS), functions.lit(UNKNOWN_OP))
    code = code.when(order.isNull(), functions.lit(NO_ORDER))
    column: Column = functions.lit(None).cast("string")
    for key in reversed([name for name in config.pk if name in names]):
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
        )
    )
    return functions.when(code.isNull(), op).otherwise(functions.concat(functions.lit(BAD_OP), info))


def cdc_spec(config: PipelineConfig, types: dict[str, str]) -> CdcSpec:
    """The parser's spec for a CDC config (``types``: the schema's ``name -> simple type``)."""
    special = {config.op_column, config.arrival_column}
    if config.ts_column is not None:
        raise PipelineConfigError(f"a {config.format.title} source has no ts column (event time)")
    columns = config.columns or tuple(name for name in types if name not in special)
    for name in (config.op_column, config.arrival_column, *columns):
        if name not in types:
            raise PipelineConfigError(f"column {name!r} is not in the source schema {list(types)}")
    if config.max_files_per_trigger not in (None, 1):
        raise PipelineConfigError(
            f"a {config.format.title} source reads one file per micro-batch (its arrival order is the "
            f"line order of a file); max_files_per_trigger must be 1, got {config.max_files_per_trigger}"
        )
    return CdcSpec(
        format=config.format.value,
        columns=tuple((name, types[name]) for name in columns),
        op_column=config.op_column,
        arrival_column=config.arrival_column,
        pk=tuple(config.pk),
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
        .load(str(config.source_path))
    )
    files = files.select(
        functions.col("_metadata.file_path").alias("path"), functions.col("value").alias("content")
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
