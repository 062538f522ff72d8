"""The resolved description of a pipeline job: source, keys, sink, checkpoint, settings.

A :class:`JobSpec` is what a job file (``upsertmat/jobs/loader.py``) and a compiled plan
(``upsertmat/plan``) both resolve to, after every configuration layer has been applied. It
holds no Spark objects, so loading, validating and compiling a job never starts a JVM.

Its parts (:class:`SourceSpec`, :class:`SinkSpec`, :class:`SparkOptions`, the
:class:`~upsertmat.impls.settings.Settings`) are the pipeline's own (:mod:`upsertmat.spark.parts`,
named here too): a run's :class:`~upsertmat.spark.config.PipelineConfig` holds the very same
objects (:func:`upsertmat.jobs.runner.pipeline_config`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..impls.settings import Settings
from ..spark.parts import COLUMN_TYPES, INTERNAL_URL, Column, SinkSpec, SourceSpec, SparkOptions
from ..spark.sources.formats import SourceFormat

__all__ = [
    "COLUMN_TYPES",
    "INTERNAL_URL",
    "Column",
    "JobSpec",
    "SinkSpec",
    "SourceFormat",
    "SourceSpec",
    "SparkOptions",
]


@dataclass(frozen=True)
class JobSpec:
    """A fully resolved job. ``materialize=False`` writes the raw changelog to the sink (no materializer)."""

    name: str
    source: SourceSpec
    sink: SinkSpec
    primary_key: tuple[str, ...]
    upsert_key: tuple[str, ...]
    checkpoint: Path
    settings: Settings
    materialize: bool = True
    spark: SparkOptions = field(default_factory=SparkOptions)
    config: dict[str, str] = field(default_factory=dict)
    """The resolved configuration keys (Flink names) as display strings, for plans and reports."""

    def pk_indexes(self) -> tuple[int, ...]:
        """Column indexes of the sink primary key in the row."""
        names = self.source.column_names
        return tuple(names.index(name) for name in self.primary_key)

    def upsert_key_indexes(self) -> tuple[int, ...]:
        """Column indexes of the upsert key in the row (``()`` for none)."""
        names = self.source.column_names
        return tuple(names.index(name) for name in self.upsert_key)
