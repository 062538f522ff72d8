"""Changelog file sources: a directory of files in one of the formats of the table
(:mod:`.formats`), read as a stream, every row that cannot be a change marked.

Spark's file source lists the directory at each trigger and takes new files in modification-
time order (``maxFilesPerTrigger`` of them per micro-batch, if set). Files must appear
atomically (write elsewhere, then rename into the directory) and in arrival order: the
arrival-order column orders events inside a batch, the file order orders the batches.

The package by role:

- :mod:`.formats`: the table of source formats (name, title, how Spark reads it); no pyspark;
- :mod:`.files`: how Spark reads each kind of file (:data:`~.files.READERS`), and the marking of
  bad rows in Spark SQL;
- :mod:`.jsonlines`: the Java twin of ``from_json`` that reads JSON Lines at the speed of Spark's
  JSON source;
- :mod:`.csvlines`: the check of a CSV line before Spark parses it (a quote left open);
- :mod:`.cdc`: Debezium, Canal and Maxwell envelopes mapped to ``+I -U +U -D`` (pure Python, run
  in ``mapInArrow``);
- :mod:`.badinput`: what a bad row is, its message, the driver's side (locate, fail, dead
  letters); no pyspark.

Importing this package imports no pyspark (``jobs/`` names the formats without it):
:func:`read_changelog` imports the readers when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .formats import SourceFormat, source_format

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import PipelineConfig

__all__ = ["SourceFormat", "read_changelog", "source_format"]


def read_changelog(spark: SparkSession, config: PipelineConfig) -> DataFrame:
    """The streaming DataFrame of ``config.source.path`` with ``config.source.ddl()``'s columns, bad rows
    marked (their op is a :data:`~.badinput.BAD_OP` marker), read as the format's table entry
    says (:data:`~.files.READERS`)."""
    from .files import READERS

    return READERS[config.source.format.reader](spark, config)
