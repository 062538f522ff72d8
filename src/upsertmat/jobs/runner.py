"""Running a resolved job on the PySpark pipeline, with a progress line per micro-batch.

:func:`pipeline_config` hands a :class:`~upsertmat.jobs.model.JobSpec`'s parts to the pipeline's
:class:`~upsertmat.spark.config.PipelineConfig`; :func:`run_job` runs it. PySpark is imported
only when a job runs, so loading, compiling and explaining jobs works without the ``spark``
extra. A missing PySpark is a :class:`~upsertmat.errors.CliError` telling how to install it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..errors import CliError, ExitCode
from ..impls.build import needs_extra
from .model import JobSpec

if TYPE_CHECKING:
    from ..spark.config import BatchProgress, PipelineConfig, PipelineResult

INSTALL_HINT = f"the pipeline {needs_extra('spark', ' (PySpark) and Java 17+')}"


def require_pyspark() -> None:
    """CliError (usage) unless PySpark can be imported."""
    if importlib.util.find_spec("pyspark") is None:
        raise CliError(INSTALL_HINT, ExitCode.USAGE)


def pipeline_config(
    job: JobSpec, *, follow: str | None = None, changelog: bool = False, query_name: str | None = None
) -> PipelineConfig:
    """The pipeline configuration of a job: the job's own parts (source, sink, keys, checkpoint,
    settings, Spark options), run available-now (process what is there, then stop), or with
    ``follow`` (a trigger interval such as ``"1 second"``) as a continuous query taking new
    files as they appear. ``changelog``: the sink records each batch's table changes."""
    from ..spark.config import PipelineConfig

    return PipelineConfig(
        source=job.source,
        sink=job.sink,
        primary_key=job.primary_key,
        checkpoint=job.checkpoint,
        upsert_key=job.upsert_key,
        settings=job.settings,
        materialize=job.materialize,
        spark=job.spark,
        available_now=follow is None,
        trigger_interval=follow or "1 second",
        changelog=changelog,
        query_name=query_name,
    )


def batch_line(prefix: str, batch: BatchProgress) -> str:
    """One progress line: ``PREFIX batch 3: 12,000 changes reached the sink -> 9,000 upserts, …``.

    "changes" are always the rows that reached the sink in the batch (the raw changelog without
    the materializer, its output with it); upserts and deletes are the statements applied
    (the last change of each key in the batch).
    """
    text = (
        f"{prefix} batch {batch.batch_id}: {batch.changes:,} changes reached the sink -> "
        f"{batch.upserts:,} upserts, {batch.deletes:,} deletes; sink {batch.sink_seconds:.2f} s; "
        f"{batch.elapsed_seconds:.1f} s elapsed"
    )
    if batch.misses:
        columns = f" (differing: {batch.miss_columns})" if batch.miss_columns else ""
        text += f"; {batch.misses:,} retraction(s) matched no stored row{columns}"
    if batch.bad_rows:
        text += f"; {batch.bad_rows:,} bad source row(s) skipped (dead letters)"
    return text + (" (already committed: skipped)" if batch.skipped else "")


def spark_log() -> Path | None:
    """Spark's own log (the JVM's and its Python workers' output) if this process started a JVM."""
    if importlib.util.find_spec("pyspark") is None or "upsertmat.spark.session" not in sys.modules:
        return None
    from ..spark.session import session_log

    return session_log()


def spark_log_note() -> str:
    """``; Spark's log: PATH`` for a message, when this process started a JVM; else empty."""
    path = spark_log()
    return "" if path is None else f"; Spark's log: {path}"


def announce_spark_log(quiet: bool, prefix: str) -> None:
    """Print where Spark's own log went (stderr), unless ``quiet`` or no JVM was started here."""
    path = spark_log()
    if not quiet and path is not None:
        print(f"{prefix}: Spark's own log (JVM and Python workers): {path}", file=sys.stderr, flush=True)


def printer(prefix: str, stream: TextIO) -> Callable[[BatchProgress], None]:
    """A progress callback writing :func:`batch_line` to ``stream``, flushed per batch."""

    def report(batch: BatchProgress) -> None:
        stream.write(batch_line(prefix, batch) + "\n")
        stream.flush()

    return report


def start_spark(job: JobSpec) -> None:
    """Start (or reuse) the Spark session of ``job``'s master. A JVM that does not start is a
    CliError naming the cause and Spark's log (exit 2; 4 when the log cannot be written)."""
    require_pyspark()
    # Imported here: these modules import PySpark, which loading and compiling jobs must not need.
    from ..spark.session import SparkStartError, build_session

    try:
        build_session(
            master=job.spark.master, shuffle_partitions=job.spark.shuffle_partitions, ui=job.spark.ui
        )
    except SparkStartError as error:
        raise CliError(str(error), ExitCode.USAGE if error.usage else ExitCode.IO) from None


def run_job(
    job: JobSpec,
    progress: Callable[[BatchProgress], None] | None = None,
    *,
    stop: Callable[[], bool] | None = None,
    follow: str | None = None,
    changelog: bool = False,
    until_idle: float | None = None,
) -> PipelineResult:
    """Run the job to the end of the available input (or, with ``follow``, until ``stop()`` or
    ``until_idle`` seconds without a batch); ``progress`` sees every micro-batch; ``stop()`` true
    stops at a micro-batch boundary."""
    start_spark(job)
    from ..spark.pipeline import run_pipeline

    # The job's master: the pipeline reuses the running session (getOrCreate).
    config = pipeline_config(job, follow=follow, changelog=changelog).with_progress(progress)
    return run_pipeline(config, stop=stop, idle_seconds=until_idle)


def committed_batches(checkpoint: Path) -> int:
    """How many micro-batches Spark's commit log in ``checkpoint`` holds (0: a new checkpoint)."""
    commits = checkpoint / "commits"
    if not commits.is_dir():
        return 0
    return sum(1 for entry in commits.iterdir() if entry.name.isdigit())


def source_files(path: Path) -> int:
    """Visible files in the source directory (Spark ignores names starting with ``.`` or ``_``)."""
    if path.is_file():
        return 1
    if not path.is_dir():
        return 0
    return sum(1 for entry in path.iterdir() if entry.is_file() and not entry.name.startswith((".", "_")))
