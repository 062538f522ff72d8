"""The table of source formats: every format the pipeline reads, named once.

Each member of :class:`SourceFormat` is one format: its name as job files and plans spell it
(the member's value: ``jsonl``, ``parquet``, ``csv``, ``debezium-json``, ``canal-json``,
``maxwell-json``), its title for messages, and how Spark reads its files (:class:`Reader`; the
functions are :data:`upsertmat.spark.sources.files.READERS`). Whether it is a CDC envelope
format and whether it is text (and so under the invalid-UTF-8 rule, docs/spark.md, "Bad
input") follow from the reader. Every other module asks the table: the job loader
(:func:`source_format` parses ``source.format``), :class:`~upsertmat.spark.parts.SourceSpec`
(a job's and a pipeline config's source), :meth:`~upsertmat.spark.config.PipelineConfig.from_json`,
:func:`~upsertmat.spark.sources.read_changelog`, the CDC parser (its envelope mappings keyed by
member), the driver's bad-row messages.

No pyspark import (and none of the rest of upsertmat): ``jobs/`` loads and checks job files
without pyspark installed.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING


class Reader(enum.Enum):
    """How Spark reads a format's files (the functions: ``sources.files.READERS``)."""

    LINES = "lines"
    """JSON Lines: the text source, one line per row, parsed with ``from_json`` (or its Java twin)."""
    CSV = "csv"
    """CSV with a header line: Spark's CSV source hands over each data line whole, as its bytes;
    each line is checked (UTF-8, an open quote) and parsed with ``from_csv``."""
    PARQUET = "parquet"
    """Spark's Parquet source with the job's schema."""
    ENVELOPES = "envelopes"
    """CDC envelopes: each file read whole and mapped to changes in Python (``sources.cdc``)."""


class SourceFormat(enum.Enum):
    """The source formats (the value is the name job files use)."""

    _value_: str
    title: str
    reader: Reader

    JSONL = ("jsonl", "JSON Lines", Reader.LINES)
    PARQUET = ("parquet", "Parquet", Reader.PARQUET)
    CSV = ("csv", "CSV", Reader.CSV)
    DEBEZIUM = ("debezium-json", "Debezium JSON", Reader.ENVELOPES)
    CANAL = ("canal-json", "Canal JSON", Reader.ENVELOPES)
    MAXWELL = ("maxwell-json", "Maxwell JSON", Reader.ENVELOPES)

    if not TYPE_CHECKING:  # a member is made from its row; looked up by its name (the value)

        def __new__(cls, name: str, title: str, reader: Reader) -> SourceFormat:
            member = object.__new__(cls)
            member._value_ = name
            member.title = title
            member.reader = reader
            return member

    @property
    def is_cdc(self) -> bool:
        """A CDC envelope format (each line a Debezium, Canal or Maxwell envelope)."""
        return self.reader is Reader.ENVELOPES

    @property
    def is_text(self) -> bool:
        """Lines of UTF-8 text: a line that is not valid UTF-8 is a bad row."""
        return self.reader is not Reader.PARQUET


PIPELINE_NAMES: dict[SourceFormat, str] = {SourceFormat.JSONL: "json"}
"""Where a format has a second spelling: JSON Lines is also ``json``, the name of Spark's reader of
its records, which the flat pipeline configs written before configs were made of parts hold
(``source_format``, read by :meth:`~upsertmat.spark.config.PipelineConfig.from_json`) and
``upsertmat bench --pipeline`` reads the files with. The only other spelling of a format, here
in the table; :func:`source_format` reads both."""

NAMES: tuple[str, ...] = tuple(member.value for member in SourceFormat)
DEFAULT: SourceFormat = SourceFormat.JSONL
"""The format of a job file's source that names none."""
_BY_PIPELINE_NAME = {name: member for member, name in PIPELINE_NAMES.items()}


def pipeline_name(member: SourceFormat) -> str:
    """``member``'s Spark reader name, as flat pipeline configs spelled it (:data:`PIPELINE_NAMES`)."""
    name = PIPELINE_NAMES.get(member)
    return member._value_ if name is None else name


def source_format(name: str | SourceFormat) -> SourceFormat:
    """The format called ``name``, as job files or as pipeline configs spell it (a member passes
    through). ValueError naming the known formats for any other name."""
    if isinstance(name, SourceFormat):
        return name
    try:
        return SourceFormat(name)
    except ValueError:
        if name in _BY_PIPELINE_NAME:
            return _BY_PIPELINE_NAME[name]
        raise ValueError(f"unknown source format {name!r}; one of {', '.join(NAMES)}") from None
