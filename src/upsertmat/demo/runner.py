"""Run the demo: generate the shuffled join output, run the pipeline without and with the materializer.

Both runs read the same JSON Lines source and write into one SQLite database (tables ``raw``
and ``materialized``), each with its own checkpoint, in one Spark session. The expected table
comes from the logical changelog; the outcome carries all three tables for the report.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..impls.settings import Settings
from ..interrupt import StopSignals
from ..jobs.model import Column, JobSpec, SinkSpec, SourceFormat, SourceSpec, SparkOptions
from .tables import Table, expected_table, read_sqlite_table
from .workload import DemoData, DemoShape, generate, write_source

if TYPE_CHECKING:
    from ..spark.config import BatchProgress, PipelineResult

RAW_TABLE, MATERIALIZED_TABLE = "raw", "materialized"
DATABASE = "demo.db"


@dataclass(frozen=True)
class DemoRun:
    """One pipeline run of the demo: its job, what the pipeline reported, the sink table."""

    job: JobSpec
    result: PipelineResult
    table: Table
    seconds: float


@dataclass(frozen=True)
class DemoOutcome:
    """The data, the expected table and both runs."""

    data: DemoData
    expected: Table
    raw: DemoRun
    materialized: DemoRun
    session_seconds: float


def demo_job(directory: Path, settings: Settings, materialize: bool, config: dict[str, str]) -> JobSpec:
    """The job of one demo run: ``directory/source`` -> (materializer) -> ``directory/demo.db``."""
    table = MATERIALIZED_TABLE if materialize else RAW_TABLE
    return JobSpec(
        name=f"demo-{table}",
        source=SourceSpec(
            path=directory / "source",
            format=SourceFormat.JSONL,
            columns=(Column("id", "long"), Column("level", "long"), Column("badge", "string")),
            op_column="op",
            order_column="seq",
        ),
        sink=SinkSpec(url=str(directory / DATABASE), table=table),
        primary_key=("id",),
        upsert_key=(),
        checkpoint=directory / f"checkpoint-{table}",
        settings=settings,
        materialize=materialize,
        spark=SparkOptions(master="local[2]", shuffle_partitions=2),
        config=config,
    )


def run_demo(
    directory: Path,
    settings: Settings,
    config: dict[str, str],
    shape: DemoShape | None = None,
    progress: Callable[[str], Callable[[BatchProgress], None] | None] | None = None,
    signals: StopSignals | None = None,
) -> DemoOutcome | None:
    """Generate the data into ``directory`` and run both jobs; ``progress(label)`` gives a callback.

    ``signals``: busy while the jobs run, so that a signal stops the run in progress at a
    micro-batch boundary, and this returns None (the outcome would be partial); before (while
    Spark starts) the frame decides (the command's is not busy: a signal ends the demo at once).
    """
    from ..jobs.runner import require_pyspark, run_job, start_spark

    require_pyspark()
    data = generate(shape)
    write_source(data, directory / "source")
    started = time.monotonic()
    start_spark(demo_job(directory, settings, True, config))
    session_seconds = time.monotonic() - started
    runs: list[DemoRun] = []
    for materialize in (False, True):
        if signals is not None:
            signals.busy = True
            if signals():
                return None
        job = demo_job(directory, settings, materialize, config)
        label = "with materializer" if materialize else "without materializer"
        started = time.monotonic()
        result = run_job(job, progress(label) if progress else None, stop=signals)
        if signals is not None and signals():
            return None
        seconds = time.monotonic() - started
        table = read_sqlite_table(directory / DATABASE, job.sink.table)
        runs.append(DemoRun(job, result, table, seconds))
    return DemoOutcome(data, expected_table(data.logical), runs[0], runs[1], session_seconds)


def run_demo_in(
    directory: Path | None,
    settings: Settings,
    config: dict[str, str],
    shape: DemoShape,
    progress: Callable[[str], Callable[[BatchProgress], None] | None] | None = None,
    signals: StopSignals | None = None,
) -> DemoOutcome | None:
    """:func:`run_demo` in ``directory`` (created if missing, kept), or with None in a temporary
    directory removed when the demo ends (its tables are in the outcome)."""
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        return run_demo(directory, settings, config, shape, progress, signals)
    with tempfile.TemporaryDirectory(prefix="upsertmat-demo-") as temporary:
        return run_demo(Path(temporary), settings, config, shape, progress, signals)
