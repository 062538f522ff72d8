"""Changelog file sources: a directory of JSON Lines, Parquet or CSV files read as a stream.

Spark's file source lists the directory at each trigger and takes new files in modification-
time order (``maxFilesPerTrigger`` of them per micro-batch, if set). Files must appear
atomically (write elsewhere, then rename into the directory) and in arrival order: the
arrival-order column orders events inside a batch, the file order orders the batches.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from .config import FORMATS, PipelineConfig, PipelineConfigError


def read_changelog(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """The streaming DataFrame of ``config.source_path`` with ``config.schema``."""
    if config.source_format not in FORMATS:
        raise PipelineConfigError(
            f"unknown source format {config.source_format!r}; one of {', '.join(FORMATS)}"
        )
    reader = spark.readStream.schema(config.schema).format(config.source_format)
    if config.source_format == "csv":
        reader = reader.option("header", "true")
    if config.max_files_per_trigger is not None:
        reader = reader.option("maxFilesPerTrigger", config.max_files_per_trigger)
    return reader.load(str(config.source_path))
