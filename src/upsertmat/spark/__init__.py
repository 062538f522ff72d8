"""upsertmat.spark — the materializer on Spark Structured Streaming with an exactly-once upsert sink.

Modules: :mod:`.config` (``PipelineConfig``, ``BatchProgress``, ``PipelineResult``) and
:mod:`.parts` (the parts a config and a job file share: ``SourceSpec``, ``SinkSpec``,
``SparkOptions``), neither importing pyspark; :mod:`.session` (the SparkSession settings),
:mod:`.processor` (the ``transformWithState`` processor running a strategy on the ``spark``
state backend), :mod:`.sources` (changelog file readers, by role: the table of formats, the
readers, the CDC parser, bad input) and :mod:`.pipeline` (``run_pipeline(config) ->
PipelineResult``); the sinks it writes are :mod:`upsertmat.sinks` (no pyspark there).
A job file runs as ``upsertmat run JOB``; a config saved with ``to_json`` runs in a process of its
own with ``tests/spark/run_config.py``. See ``docs/spark.md``.
"""

from .config import BatchProgress, PipelineConfig, PipelineConfigError, PipelineResult

__all__ = ["BatchProgress", "PipelineConfig", "PipelineConfigError", "PipelineResult"]
