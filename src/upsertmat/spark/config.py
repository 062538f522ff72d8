"""What a pipeline run is told and what it reports: :class:`PipelineConfig`, :class:`BatchProgress`,
:class:`PipelineResult`.

The pipeline (:func:`upsertmat.spark.pipeline.run_pipeline`) reads a changelog from files, runs the
materializer keyed by the sink primary key on Spark's state store, and upserts the result into a
database table exactly once per micro-batch. Everything it needs is in one frozen
:class:`PipelineConfig`; it reports every micro-batch to ``config.progress`` (a
:class:`BatchProgress`) and returns a :class:`PipelineResult`. A config round-trips through JSON
(:meth:`PipelineConfig.to_json` / :meth:`PipelineConfig.from_json`; the progress callback is not
serialised), which is how ``python -m upsertmat.spark CONFIG.json`` runs one in a subprocess.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..impls.config import parse_duration_ms
from ..impls.misses import MissSummary
from ..impls.registry import PIPELINE_ONLY
from ..impls.settings import (
    DEFAULT_MISS_ROWS,
    Backend,
    ConflictBehavior,
    Strategy,
    TimeDomain,
    TtlSettings,
    UpdateType,
)
from ..sinks import SinkUrlError, check_url
from .sources.formats import DEFAULT, SourceFormat, pipeline_name, source_format

ON_ERROR = ("fail", "skip")
STATE_LAYOUTS = ("log", "blob")
PIPELINE_STRATEGIES: tuple[Strategy, ...] = tuple(
    strategy for strategy, backend in PIPELINE_ONLY if backend is Backend.SPARK
)
"""The strategies the pipeline runs (every one but SORTED, whose ordered seek Spark's map state lacks)."""


class PipelineConfigError(ValueError):
    """A pipeline configuration that cannot run (unknown column, bad format, missing key...)."""


@dataclass(frozen=True)
class BatchProgress:
    """One micro-batch as the sink saw it (reported from ``foreachBatch``, on the driver).

    ``changes``: rows that reached the sink (materializer output, or the raw changelog without
    it); ``upserts``/``deletes``: statements applied; ``skipped``: the batch id was already
    committed in the sink (a batch re-run after a restart: nothing applied). ``sink_seconds``:
    time inside ``foreachBatch``: collecting the batch (which runs the batch's source, shuffle
    and materializer stages: Spark evaluates lazily) plus the transaction; ``write_seconds``:
    the database transaction alone; ``elapsed_seconds``: since the query started.
    """

    batch_id: int
    changes: int
    upserts: int
    deletes: int
    skipped: bool
    sink_seconds: float
    elapsed_seconds: float
    write_seconds: float = 0.0
    misses: int = 0
    """Retractions of the batch that matched no stored row (explained; docs/spark.md, Misses)."""
    miss_columns: str = ""
    """The columns those misses differed in, most often first (``uuid 12, ts 12``)."""
    bad_rows: int = 0
    """Source rows of the batch that could not be changes, written to the dead-letter directory
    (``on_error="skip"``; docs/spark.md, Bad input)."""
    state_calls: int = 0
    """The materializer's calls to Spark's state server in this batch (all executors)."""
    state_bytes_read: int = 0
    """Bytes of state the materializer read in this batch (as stored)."""
    state_bytes_written: int = 0
    """Bytes of state the materializer wrote in this batch (as stored)."""
    state_seconds: float = 0.0
    """Seconds the materializer spent in state access in this batch, summed over its tasks
    (JVM round trips, and the decoding and encoding of whole-bucket blobs)."""


@dataclass(frozen=True)
class PipelineConfig:
    """One pipeline: source files -> (materializer) -> upsert sink.

    Source: every file in ``source_path`` (a directory, watched as a stream; new files must
    appear atomically, e.g. written elsewhere then renamed in) in ``source_format``, a name of the
    table of formats (:mod:`upsertmat.spark.sources.formats`: ``json`` = JSON Lines, ``parquet``,
    ``csv`` with a header, ``debezium-json``, ``canal-json``, ``maxwell-json``; the job file's
    ``jsonl`` is taken too, and stored as ``json``), read with the DDL ``schema`` (e.g.
    ``"seq LONG, op STRING, id LONG, level LONG, payload STRING"``). ``op_column`` holds
    ``+I -U +U -D``; ``arrival_column`` (integer) gives the arrival order, which is the order the
    materializer applies the events of one key in. ``columns``: the row's columns in order (the
    sink table's columns); default: every schema column except op, arrival and ts. ``ts_column``:
    optional event timestamp (ms). ``max_files_per_trigger``: files per micro-batch (None: all).

    Keys: ``pk`` names the sink primary key columns (state is keyed by them: ``groupBy(pk)``),
    ``upsert_key`` the upsert key columns (empty: rows match on the whole row).

    Materializer: ``strategy`` (VALUE, MAP, LEGACY, ADAPTIVE, SORTED) on the ``spark`` backend;
    ``materialize=False`` bypasses it: the sink applies the raw changelog in arrival order
    (``+I``/``+U`` upsert, ``-U``/``-D`` delete), which shows the wrong result of a sink without
    a materializer. ``ttl`` is passed to the strategy.

    Sink: ``sink_url`` is a URL of a kind in the table of sinks (:data:`upsertmat.sinks.KINDS`:
    ``sqlite:///path/to.db`` or a plain file path, ``postgresql://user@host:port/db``,
    ``delta:///dir``, ``iceberg:///dir``, ``paimon:///dir``); ``table`` is created if missing with
    the PK as primary key. Each sink records the batch ids it committed in the same transaction
    as the rows (the SQL sinks in ``_upsertmat_batches``, keyed by ``table``; the lakehouse sinks
    in their commit metadata), so a replayed batch is skipped.

    Spark: ``checkpoint_dir`` holds offsets, commits and state (restart on the same directory to
    continue); ``available_now=True`` processes what is there and stops, otherwise the query runs
    with ``trigger_interval`` until ``timeout_seconds`` (None: until stopped).
    ``shuffle_partitions`` is the number of state partitions (pinned in the checkpoint).
    ``key_buckets``: None groups by the PK columns (one Spark grouping key per sink key); ``n``
    groups by ``pmod(xxhash64(pk), n)`` instead — state stays keyed by the sink PK inside each
    bucket, events of each key still apply in arrival order, outputs are identical, but Spark's
    per-grouping-key cost (about 0.3 ms per key per batch, the dominant cost) is paid per bucket;
    a bucket's state is laid out as ``state_layout`` says (``log``: appended changes read through
    a machine-local copy, so a batch costs what it touches; ``blob``: one blob per bucket, read
    and rewritten whole by each batch touching it); buckets also emit
    only the last change per sink key of a batch
    (what the sink keeps, as one msgpack output row per bucket), and, when every column is an
    integer, double, boolean or string, pack each source Arrow batch's changes per bucket
    before the shuffle (``upsertmat.spark.packing``; docs/spark.md).
    Pinned in the checkpoint like ``shuffle_partitions``. ``master``: the Spark master the
    pipeline starts its session on when it starts one (``local[2]``, ``spark://host:7077``...;
    the checkpoint, source and sink must then be reachable from every executor);
    ``spark_conf``: more Spark settings for that session (e.g. ``spark.executor.memory``).
    ``changelog``: the sink also records each committed batch's table changes (``+I -U +U -D``,
    read with :mod:`upsertmat.sinks`); ``query_name``: Spark's name of the query.
    """

    source_path: Path
    schema: str
    pk: tuple[str, ...]
    checkpoint_dir: Path
    sink_url: str
    upsert_key: tuple[str, ...] = ()
    columns: tuple[str, ...] | None = None
    source_format: str = pipeline_name(DEFAULT)
    op_column: str = "op"
    arrival_column: str = "seq"
    ts_column: str | None = None
    max_files_per_trigger: int | None = None
    table: str = "sink"
    materialize: bool = True
    strategy: Strategy = Strategy.VALUE
    threshold_high: int | None = None
    threshold_low: int | None = None
    ttl: TtlSettings = field(default_factory=TtlSettings)
    available_now: bool = True
    trigger_interval: str = "1 second"
    timeout_seconds: float | None = None
    shuffle_partitions: int = 2
    key_buckets: int | None = None
    # With key buckets: "log" (each bucket's state an append-only log in Spark read through a
    # machine-local copy: a batch costs what it touches) or "blob" (one blob per bucket, read and
    # rewritten whole by every batch that touches it). docs/spark.md, "State at table scale".
    state_layout: str = "log"
    # ON CONFLICT DO ERROR | NOTHING (upsertmat.spark.conflict): needs ts_column; the watermark
    # trails the greatest ts seen by watermark_delay (a Spark interval, e.g. "5 seconds").
    conflict: ConflictBehavior = ConflictBehavior.DEDUPLICATE
    watermark_delay: str = "0 seconds"
    master: str = "local[2]"
    spark_conf: dict[str, str] = field(default_factory=dict)
    # The sink records every committed batch's table changes (upsertmat.sinks reads them).
    changelog: bool = False
    # Spark's name of the query (unique among a session's active queries); default upsertmat_<table>.
    query_name: str | None = None
    # upsertmat.misses.max-rows: explain each miss from at most this many stored rows (0: off);
    # the explanations go to the sink database's _upsertmat_misses table.
    miss_rows: int = DEFAULT_MISS_ROWS
    # A source row that cannot be a change: "fail" stops the batch before the sink commits it,
    # "skip" writes it to dead_letter_dir (default <checkpoint_dir>/dead-letter) and goes on.
    on_error: str = "fail"
    dead_letter_dir: Path | None = None
    progress: Callable[[BatchProgress], None] | None = field(default=None, compare=False)

    def to_json(self) -> str:
        """The config as JSON (without ``progress``)."""
        data: dict[str, Any] = {}
        for item in fields(self):
            if item.name == "progress":
                continue
            value = getattr(self, item.name)
            if isinstance(value, Path):
                value = str(value)
            elif isinstance(value, Strategy | ConflictBehavior):
                value = value.value
            elif isinstance(value, TtlSettings):
                value = asdict(value)
                value["time_domain"] = self.ttl.time_domain.value
                value["update_type"] = self.ttl.update_type.value
            elif isinstance(value, tuple):
                value = list(value)
            data[item.name] = value
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> PipelineConfig:
        """The config :meth:`to_json` wrote. PipelineConfigError on unknown or missing fields."""
        data = json.loads(text)
        known = {item.name for item in fields(cls)} - {"progress"}
        unknown = set(data) - known
        if unknown:
            raise PipelineConfigError(f"unknown pipeline config fields: {sorted(unknown)}")
        try:
            for name in ("source_path", "checkpoint_dir"):
                data[name] = Path(data[name])
            if data.get("dead_letter_dir") is not None:
                data["dead_letter_dir"] = Path(data["dead_letter_dir"])
            for name in ("pk", "upsert_key", "columns"):
                if data.get(name) is not None:
                    data[name] = tuple(data[name])
            if "strategy" in data:
                data["strategy"] = Strategy(data["strategy"])
            if "conflict" in data:
                data["conflict"] = ConflictBehavior(data["conflict"])
            if "ttl" in data:
                ttl = data["ttl"]
                data["ttl"] = TtlSettings(
                    ttl_ms=int(ttl.get("ttl_ms", 0)),
                    time_domain=TimeDomain(ttl.get("time_domain", TimeDomain.PROCESSING_TIME.value)),
                    update_type=UpdateType(ttl.get("update_type", UpdateType.ON_CREATE_AND_WRITE.value)),
                )
            config = cls(**data)
        except (KeyError, TypeError, ValueError) as error:
            raise PipelineConfigError(f"bad pipeline config: {error}") from error
        return config

    def __post_init__(self) -> None:
        check_config(self)
        # One spelling per format in a config: a job file's "jsonl" is stored as "json".
        object.__setattr__(self, "source_format", pipeline_name(self.format))

    @property
    def format(self) -> SourceFormat:
        """The source format's entry in the table of formats."""
        return source_format(self.source_format)

    @property
    def dead_letters(self) -> Path:
        """The dead-letter directory of ``on_error="skip"`` (default ``<checkpoint>/dead-letter``)."""
        return (
            self.dead_letter_dir if self.dead_letter_dir is not None else self.checkpoint_dir / "dead-letter"
        )

    def with_progress(self, progress: Callable[[BatchProgress], None] | None) -> PipelineConfig:
        """A copy reporting to ``progress``."""
        return replace(self, progress=progress)


def check_config(config: PipelineConfig) -> None:
    """PipelineConfigError naming the first field of ``config`` that cannot run: everything that
    can be known without Spark, so that a config is refused when it is made, not once Spark has
    started (the column names are checked against the source schema when the query starts).
    O(len(pk) + len(sink_url))."""
    if config.key_buckets is not None and config.key_buckets < 1:
        raise PipelineConfigError(f"key_buckets must be >= 1 (or None), got {config.key_buckets}")
    if config.shuffle_partitions < 1:
        raise PipelineConfigError(f"shuffle_partitions must be >= 1, got {config.shuffle_partitions}")
    if config.max_files_per_trigger is not None and config.max_files_per_trigger < 1:
        raise PipelineConfigError(
            f"max_files_per_trigger must be >= 1 (or None), got {config.max_files_per_trigger}"
        )
    try:
        source_format(config.source_format)
    except ValueError as error:
        raise PipelineConfigError(str(error)) from None
    if not config.pk:
        raise PipelineConfigError("the sink primary key (pk) needs at least one column")
    if config.state_layout not in STATE_LAYOUTS:
        raise PipelineConfigError(
            f"state_layout must be one of {', '.join(STATE_LAYOUTS)}, got {config.state_layout!r}"
        )
    if config.on_error not in ON_ERROR:
        raise PipelineConfigError(f"on_error must be one of {', '.join(ON_ERROR)}, got {config.on_error!r}")
    try:
        check_url(config.sink_url)
    except SinkUrlError as error:
        raise PipelineConfigError(f"sink_url: {error}") from None
    try:
        parse_duration_ms(config.trigger_interval)
    except ValueError as error:
        raise PipelineConfigError(f"trigger_interval: {error}") from None
    if config.strategy not in PIPELINE_STRATEGIES:
        names = ", ".join(strategy.value for strategy in PIPELINE_STRATEGIES)
        raise PipelineConfigError(
            f"strategy {config.strategy.value} does not run on the pipeline (Spark's state store has no "
            f"ordered seek); use one of {names}"
        )
    if config.ttl.enabled and config.ttl.time_domain is not TimeDomain.PROCESSING_TIME:
        raise PipelineConfigError(
            "the Spark pipeline supports processing-time state TTL only "
            "(upsertmat.state.ttl.time-domain = processing_time); see docs/spark.md"
        )
    if config.conflict.compacting and config.ts_column is None:
        raise PipelineConfigError(
            f"table.exec.sink.conflict-strategy={config.conflict.value} compacts at event-time watermarks: "
            "set ts_column (the changes' event time in ms)"
        )


@dataclass(frozen=True)
class BatchTiming:
    """Where one micro-batch's time went, from Spark's progress report (milliseconds).

    ``durations_ms``: Spark's ``durationMs`` phases: ``triggerExecution`` (the whole batch),
    ``latestOffset`` + ``getBatch`` (listing the source), ``queryPlanning``, ``walCommit``
    (the offsets log), ``addBatch`` (running the batch: source read, shuffle, materializer and
    our ``foreachBatch`` sink), ``commitOffsets`` (the commit log). ``state_commit_ms``: the
    state store commit (RocksDB) summed over the stateful operators; ``state_rows``: rows in
    the state store after the batch.
    """

    batch_id: int
    input_rows: int
    durations_ms: dict[str, int]
    state_commit_ms: int = 0
    state_rows: int = 0

    @property
    def total_ms(self) -> int:
        """The whole batch (``triggerExecution``)."""
        return self.durations_ms.get("triggerExecution", 0)

    @property
    def outside_add_batch_ms(self) -> int:
        """The batch's time outside running it: source listing, planning, offsets and commit logs."""
        return max(self.total_ms - self.durations_ms.get("addBatch", 0), 0)


@dataclass(frozen=True)
class PipelineResult:
    """What a finished (or timed-out) run did.

    ``batches``: every micro-batch the sink saw in this run, in order; ``input_rows``: rows
    read from the source in this run (Spark's progress reports); ``seconds``: wall time from
    query start to stop (session start-up excluded); ``query_id``: Spark's query id (stable
    across restarts on one checkpoint); ``timings``: Spark's report of every data batch of
    this run (:class:`BatchTiming`; the last 1,000 batches at most).
    """

    batches: tuple[BatchProgress, ...]
    input_rows: int
    seconds: float
    query_id: str
    timings: tuple[BatchTiming, ...] = ()
    misses: MissSummary = field(default_factory=MissSummary)
    """Every explained miss of the batches this run committed (docs/spark.md, Misses)."""

    @property
    def changes(self) -> int:
        """Rows that reached the sink in this run."""
        return sum(batch.changes for batch in self.batches)

    @property
    def bad_rows(self) -> int:
        """Source rows of the committed batches of this run that went to the dead-letter directory."""
        return sum(batch.bad_rows for batch in self.batches if not batch.skipped)
