"""Changelog file sources: a directory of JSON Lines, Parquet, CSV or CDC (Debezium, Canal,
Maxwell JSON) files read as a stream, with every row that cannot be a change marked.

Spark's file source lists the directory at each trigger and takes new files in modification-
time order (``maxFilesPerTrigger`` of them per micro-batch, if set). Files must appear
atomically (write elsewhere, then rename into the directory) and in arrival order: the
arrival-order column orders events inside a batch, the file order orders the batches.

Bad rows (:mod:`upsertmat.spark.badinput`) are found here, in Spark SQL before the materializer:
a JSON line Spark cannot read with the declared types, a CSV line it cannot read (both keep their
raw text: JSON Lines are read as text and parsed with ``from_json``, so that every bad line's
text is at hand), a missing or unknown op, a missing order column or sink primary key column.
Such a row's op becomes a bad-row marker carrying its file, its raw text or Parquet row index and
a code; the other columns keep what was read. ``from_json``'s rows come from
:data:`~.jsonlines.JSON_LINE_PARSER` where it can be used (the same rows, twice as fast;
:mod:`.jsonlines`). CDC files are parsed in Python
(:mod:`upsertmat.spark.cdc`: each file read whole, ``wholetext``, one file per micro-batch),
which marks bad envelopes itself.
"""

from __future__ import annotations

import functools

from pyspark.sql import Column, DataFrame, SparkSession, functions
from pyspark.sql.types import StringType, StructField, StructType

from .badinput import BAD_OP, CORRUPT, NO_KEY, NO_OP, NO_ORDER, OPS, UNKNOWN_OP
from .cdc import FORMATS as CDC_FORMATS
from .cdc import CdcSpec, parse_files
from .config import FORMATS, PipelineConfig, PipelineConfigError
from .jsonlines import json_line_parser

CORRUPT_COLUMN = "_upsertmat_corrupt"
FILE_COLUMN = "_upsertmat_file"
TEXT_COLUMN = "_upsertmat_text"
ROW_COLUMN = "_upsertmat_row"


def read_changelog(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """The streaming DataFrame of ``config.source_path`` with ``config.schema``'s columns, bad rows
    marked (their op is a :data:`~upsertmat.spark.badinput.BAD_OP` marker)."""
    if config.source_format not in FORMATS:
        raise PipelineConfigError(
            f"unknown source format {config.source_format!r}; one of {', '.join(FORMATS)}"
        )
    if config.source_format in CDC_FORMATS:
        return _cdc(spark, config)
    schema = spark.createDataFrame([], config.schema).schema
    names = schema.fieldNames()
    reader = spark.readStream
    if config.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", config.max_files_per_trigger)
    path = str(config.source_path)
    corrupt = StructType([*schema.fields, StructField(CORRUPT_COLUMN, StringType(), True)])
    if config.source_format == "json":
        lines = reader.format("text").load(path)
        lines = lines.select(
            functions.col("value"), functions.col("_metadata.file_path").alias(FILE_COLUMN)
        ).where(functions.trim(functions.col("value")) != "")
        parse = json_line_parser(spark, corrupt, CORRUPT_COLUMN)
        if parse is not None:
            parsed = parse(functions.col("value"))
        else:
            options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
            parsed = functions.from_json(functions.col("value"), corrupt, options)
        frame = lines.select(
            functions.col("value").alias(TEXT_COLUMN), functions.col(FILE_COLUMN), parsed.alias("r")
        ).select(TEXT_COLUMN, FILE_COLUMN, "r.*")
        text = functions.col(TEXT_COLUMN)
        row = functions.lit(None).cast("long")
    elif config.source_format == "csv":
        frame = (
            reader.schema(corrupt)
            .option("header", "true")
            .option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
            .format("csv")
            .load(path)
        )
        frame = frame.select("*", functions.col("_metadata.file_path").alias(FILE_COLUMN))
        text = functions.col(CORRUPT_COLUMN)
        row = functions.lit(None).cast("long")
    else:
        frame = reader.schema(schema).format("parquet").load(path)
        frame = frame.select(
            "*",
            functions.col("_metadata.file_path").alias(FILE_COLUMN),
            functions.col("_metadata.row_index").alias(ROW_COLUMN),
        ).withColumn(CORRUPT_COLUMN, functions.lit(None).cast("string"))
        text = functions.lit(None).cast("string")
        row = functions.col(ROW_COLUMN)
    marked = _marked_op(config, names, text, row)
    return frame.select(
        *[marked.alias(name) if name == config.op_column else functions.col(name) for name in names]
    )


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
        raise PipelineConfigError(f"a {config.source_format} source has no ts column (event time)")
    columns = config.columns or tuple(name for name in types if name not in special)
    for name in (config.op_column, config.arrival_column, *columns):
        if name not in types:
            raise PipelineConfigError(f"column {name!r} is not in the source schema {list(types)}")
    if config.max_files_per_trigger not in (None, 1):
        raise PipelineConfigError(
            f"a {config.source_format} source reads one file per micro-batch (its arrival order is the "
            f"line order of a file); max_files_per_trigger must be 1, got {config.max_files_per_trigger}"
        )
    return CdcSpec(
        format=config.source_format,
        columns=tuple((name, types[name]) for name in columns),
        op_column=config.op_column,
        arrival_column=config.arrival_column,
        pk=tuple(config.pk),
    )


def _cdc(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    schema = spark.createDataFrame([], config.schema).schema
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
