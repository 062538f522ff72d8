"""The embedded client: run a resolved job in this process, with progress, a result mode and a summary.

:func:`execute` is what ``upsertmat run`` and ``upsertmat execute-plan`` do once their command
line is parsed (:class:`RunOptions`): it starts Spark, runs the job (available-now, or continuous
with ``follow``), feeds the result mode after every committed micro-batch
(:class:`~upsertmat.jobs.embedded.ResultFollower`), and says how it ended. Progress and the
summary go to stderr (the summary to stdout when no result mode owns it); the exit code is
returned (:class:`~upsertmat.errors.ExitCode`), and what the pipeline refuses is a
:class:`~upsertmat.errors.CliError` with its code. PySpark is imported only when a job runs.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import RETRY_WAITS, CliError, ExitCode, concurrent_writer, transient_failure
from ..interrupt import Interrupted, StopSignals, interrupted
from ..stdout import silence
from .embedded import ResultFollower, embedded_session
from .model import JobSpec
from .results import Views
from .runner import (
    announce_spark_log,
    committed_batches,
    printer,
    require_pyspark,
    run_job,
    source_files,
    spark_log_note,
    start_spark,
)

if TYPE_CHECKING:
    from ..spark.config import BatchProgress, PipelineResult


@dataclass(frozen=True)
class RunOptions:
    """How an embedded run goes: continuous or not, which result mode, and its bounds."""

    quiet: bool = False
    follow: str | None = None
    until_idle: float | None = None
    result_mode: str | None = None
    format: str = "text"
    max_table_rows: int = 1000
    max_changelog_rows: int = 1000
    session_dir: Path | None = None
    views: Views | None = None
    """What draws a result mode (the command line's: :class:`upsertmat.client.render.TerminalViews`);
    needed when ``result_mode`` is set."""


BOUNDARY_NOTICE = "stopping at the next micro-batch boundary (press Ctrl-C again to exit at once)"


def execute(job: JobSpec, options: RunOptions, prefix: str) -> int:
    """Run ``job`` in this process (the embedded client): progress on stderr unless quiet, the
    result mode's output, the summary on stderr for a result mode (stdout otherwise).

    Ctrl-C / SIGTERM while Spark starts end the run at once; once the query runs, at a
    micro-batch boundary (a second signal: at once). Either way one ``interrupted`` line, exit
    130 / 143. ``until_idle`` stops with exit 0 once no batch has run for that many seconds.
    """
    require_pyspark()
    signals = StopSignals(prefix, busy=True, notice=BOUNDARY_NOTICE, force=True)
    try:
        with signals, embedded_session(job, options.session_dir) as running:
            return _execute(running, options, prefix, signals)
    except Interrupted as stop:  # while Spark was starting: no query ran
        return interrupted(
            prefix, stop, f" while Spark was starting: this run wrote nothing{spark_log_note()}"
        )


def _execute(job: JobSpec, options: RunOptions, prefix: str, signals: StopSignals) -> int:
    """:func:`execute` inside its signal frame, which starts ``busy``: signals are looked at once
    the set-up is done; the frame is not busy while Spark starts, busy again while the query runs."""
    from ..sinks import SinkError
    from ..spark.config import PipelineConfigError
    from ..spark.sources.badinput import BadInput

    resumed = committed_batches(job.checkpoint)
    follower = None
    try:
        follower = _follower(job, options, prefix)
        report = (
            None
            if options.quiet or options.result_mode in ("table", "changelog")
            else printer(prefix, sys.stderr)
        )

        def progress(batch: BatchProgress) -> None:
            if report is not None:
                report(batch)
            if follower is not None:
                follower.on_batch(batch)

        with _page_keys(follower, options.views):
            if follower is not None:
                follower.show()  # what earlier runs committed, before the first new batch
            if not options.quiet:
                print(f"{prefix}: starting Spark ({job.spark.master}) ...", file=sys.stderr, flush=True)
            signals.busy = False
            signals.check()
            start_spark(job)  # a signal now ends the run at once (Interrupted)
            signals.busy = True
            found = _run_retrying(
                lambda: run_job(
                    job,
                    progress,
                    stop=lambda: signals() or (follower is not None and follower.closed),
                    follow=options.follow,
                    changelog=options.result_mode in ("changelog", "tableau"),
                    until_idle=options.until_idle,
                ),
                options.follow is not None,
                prefix,
                signals,
                job.checkpoint,
            )
    except PipelineConfigError as error:
        raise CliError(str(error), ExitCode.USAGE) from None
    except BadInput as error:
        raise CliError(str(error), ExitCode.BAD_INPUT) from None
    except SinkError as error:
        raise CliError(str(error), ExitCode.IO) from None
    finally:
        signals.busy = True  # the clean-up runs to its end
        if follower is not None and not follower.closed:
            follower.renderer.close()
    if follower is not None and follower.closed:
        return silence()  # stdout's reader went away: every committed batch is kept
    if found is None:  # interrupted while waiting to retry
        signals.say(
            f"interrupted ({signals.name}) before a retry; every committed batch is kept: "
            f"run the same command again to continue{spark_log_note()}"
        )
        return signals.exit_code
    result, retries = found
    if signals():
        done = f" after {_batches(len(result.batches))} ({result.changes:,} changes)"
        signals.say(
            f"interrupted ({signals.name}){done}; every committed batch is kept: "
            f"run the same command again to continue{spark_log_note()}"
        )
        return signals.exit_code
    _summary(job, result, resumed, options, prefix)
    if retries:
        retried = "once" if retries == 1 else f"{retries} times"
        print(
            f"{prefix}: retried {retried} from the checkpoint; the figures above are the last attempt's",
            file=sys.stderr,
        )
    announce_spark_log(options.quiet, prefix)
    return int(ExitCode.OK)


def _run_retrying(
    run: Callable[[], PipelineResult], follow: bool, prefix: str, signals: StopSignals, checkpoint: Path
) -> tuple[PipelineResult, int] | None:
    """``run()`` and how many times a transient failure (:func:`~upsertmat.errors.transient_failure`)
    was retried first. A following run retries from the checkpoint after each of
    :data:`~upsertmat.errors.RETRY_WAITS` (exactly once: the sink skips a batch it committed);
    then, or at once without ``follow``, the failure is one line and exit 75. Spark stopping the
    query because another run writes ``checkpoint`` is one line and exit 3. None if a signal
    came while it waited."""
    retries = 0
    while True:
        try:
            return run(), retries
        except Exception as error:
            if concurrent_writer(error):
                raise CliError(
                    f"another run writes the checkpoint {checkpoint}: Spark stopped this one "
                    "([CONCURRENT_STREAM_LOG_UPDATE]); every batch committed before is kept, each once. "
                    "Run one job per checkpoint",
                    ExitCode.STATE_DIR,
                ) from None
            reason = transient_failure(error)
            if reason is None:
                raise
            if not follow or retries >= len(RETRY_WAITS) or signals():
                tried = f" (after {retries} retries from the checkpoint)" if retries else ""
                raise CliError(
                    f"{reason}{tried}; every committed batch is kept: run the same command again "
                    f"to continue{spark_log_note()}",
                    ExitCode.TRANSIENT,
                ) from None
            wait = RETRY_WAITS[retries]
            retries += 1
            print(
                f"{prefix}: {reason}; retrying from the checkpoint in {wait:g} s "
                f"(retry {retries} of {len(RETRY_WAITS)})",
                file=sys.stderr,
                flush=True,
            )
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if signals():
                    return None
                time.sleep(0.1)


def _follower(job: JobSpec, options: RunOptions, prefix: str) -> ResultFollower | None:
    if options.result_mode is None:
        return None
    if options.views is None:
        raise ValueError("a result mode needs RunOptions.views (what draws it)")
    title = f"{prefix}: job {job.name!r}, table {job.sink.table}"
    renderer = options.views.renderer(
        options.result_mode,
        title,
        max_rows=options.max_table_rows,
        keep=options.max_changelog_rows,
        format=options.format,
    )
    return ResultFollower(
        job.sink.url, job.sink.table, job.primary_key, options.result_mode, renderer, options.max_table_rows
    )


def _page_keys(
    follower: ResultFollower | None, views: Views | None
) -> contextlib.AbstractContextManager[object]:
    if follower is None or follower.mode != "table" or views is None:
        return contextlib.nullcontext()
    return views.keys(follower.renderer)


def _batches(number: int) -> str:
    """``1 micro-batch``, ``2 micro-batches``."""
    return f"{number:,} micro-batch{'' if number == 1 else 'es'}"


def _summary(job: JobSpec, result: PipelineResult, resumed: int, options: RunOptions, prefix: str) -> None:
    rate = result.input_rows / result.seconds if result.seconds > 0 else 0.0
    where = "the internal result" if job.sink.internal else f"{job.sink.url} table {job.sink.table}"
    text = (
        f"{prefix}: job {job.name!r}: {result.input_rows:,} changes read, {result.changes:,} written to "
        f"{where} in {_batches(len(result.batches))}, "
        f"{result.seconds:.1f} s ({rate:,.0f} changes/s); "
        f"materializer {'on, ' + job.settings.strategy.value if job.materialize else 'off'}"
    )
    if result.input_rows == 0 and not result.batches and resumed and source_files(job.source.path):
        text += (
            f"; the checkpoint {job.checkpoint} has already processed every file in {job.source.path} "
            "(new files are picked up; a new --checkpoint and sink start over)"
        )
    # A result mode owns stdout (tableau: nothing but changes), so the summary goes to stderr.
    stream = sys.stderr if options.result_mode is not None else sys.stdout
    if not (options.quiet and stream is sys.stderr):
        print(text, file=stream, flush=True)
        for line in result.misses.lines(job.source.column_names):
            print(f"{prefix}: {line}", file=stream, flush=True)
        if result.bad_rows:
            directory = job.source.dead_letter or job.checkpoint / "dead-letter"
            print(
                f"{prefix}: skipped {result.bad_rows:,} bad source row(s); they are in {directory}",
                file=stream,
                flush=True,
            )
        if result.misses.misses and job.sink.kind.records_misses:
            where = "the internal result's database" if job.sink.internal else job.sink.url
            print(
                f"{prefix}: each miss is explained in table _upsertmat_misses of {where}",
                file=stream,
                flush=True,
            )
