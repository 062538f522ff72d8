"""What a pipeline run is told and what it reports: :class:`PipelineConfig`, :class:`BatchProgress`,
:class:`PipelineResult`.

The pipeline (:func:`upsertmat.spark.pipeline.run_pipeline`) reads a changelog from files, runs the
materializer keyed by the sink primary key on Spark's state store, and upserts the result into a
database table exactly once per micro-batch. Everything it needs is in one frozen
:class:`PipelineConfig`, made of the parts a job is made of (:mod:`.parts`) and the options of
the run; it reports every micro-batch to ``config.progress`` (a :class:`BatchProgress`) and
returns a :class:`PipelineResult`. A config round-trips through JSON
(:meth:`PipelineConfig.to_json` / :meth:`PipelineConfig.from_json`; the progress callback is not
serialised), which is how the tests and tools run one in a subprocess of its own
(``tests/spark/run_config.py``).
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from types import UnionType
from typing import Any, get_args, get_origin, get_type_hints

from ..impls.config import parse_duration_ms
from ..impls.misses import MissSummary
from ..impls.registry import PIPELINE_ONLY
from ..impls.settings import Backend, ConflictBehavior, Settings, Strategy, TimeDomain
from ..sinks import SinkUrlError, check_url
from .parts import SinkSpec, SourceSpec, SparkOptions
from .sources.formats import DEFAULT, SourceFormat, source_format

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


PIPELINE_SETTINGS = Settings(strategy=Strategy.VALUE, backend=Backend.SPARK)
"""The settings of a config that names none: VALUE on Spark's state store."""


@dataclass(frozen=True)
class PipelineConfig:
    """One pipeline run: source files -> (materializer) -> upsert sink.

    A config is made of the parts a job is made of (:mod:`.parts`; a job file's
    :class:`~upsertmat.jobs.model.JobSpec` hands over its own objects:
    :func:`upsertmat.jobs.runner.pipeline_config`), plus the options of one run.

    The parts: ``source`` (:class:`~.parts.SourceSpec`: the files, their format and columns, the
    op / order / ts columns, bad input), ``sink`` (:class:`~.parts.SinkSpec`: URL and table),
    ``primary_key`` (the sink's key columns: state is keyed by them, ``groupBy(primary_key)``),
    ``upsert_key`` (empty: rows match on the whole row), ``checkpoint`` (Spark's offsets,
    commits and state: restart on the same directory to continue), ``settings`` (the
    materializer: the pipeline reads its ``strategy``, ``threshold_high`` / ``threshold_low``,
    ``ttl`` and ``miss_rows``, and runs it on the ``spark`` backend whatever ``backend`` says),
    ``materialize`` (False bypasses the materializer: the sink applies the raw changelog in
    arrival order, ``+I``/``+U`` upsert, ``-U``/``-D`` delete, which shows the wrong result of a
    sink without a materializer) and ``spark`` (:class:`~.parts.SparkOptions`: master, state
    partitions, key buckets and state layout, files per micro-batch, session settings).

    The run: ``available_now=True`` processes what is there and stops, otherwise the query runs
    with ``trigger_interval`` until ``timeout_seconds`` (None: until stopped). ``conflict``:
    ``ON CONFLICT DO ERROR | NOTHING`` (:mod:`upsertmat.spark.conflict`) needs
    ``source.ts_column``: the watermark trails the greatest ts seen by ``watermark_delay`` (a
    Spark interval, e.g. ``"5 seconds"``); ``settings.conflict`` is not read, so a job (which
    declares no event-time column) always deduplicates. ``changelog``: the sink also records each
    committed batch's table changes (``+I -U +U -D``, read with :mod:`upsertmat.sinks`);
    ``query_name``: Spark's name of the query (unique among a session's active queries; default
    ``upsertmat_<table>``); ``progress`` sees every micro-batch.
    """

    source: SourceSpec
    sink: SinkSpec
    primary_key: tuple[str, ...]
    checkpoint: Path
    upsert_key: tuple[str, ...] = ()
    settings: Settings = PIPELINE_SETTINGS
    materialize: bool = True
    spark: SparkOptions = field(default_factory=SparkOptions)
    available_now: bool = True
    trigger_interval: str = "1 second"
    timeout_seconds: float | None = None
    conflict: ConflictBehavior = ConflictBehavior.DEDUPLICATE
    watermark_delay: str = "0 seconds"
    changelog: bool = False
    query_name: str | None = None
    progress: Callable[[BatchProgress], None] | None = field(default=None, compare=False)

    def to_json(self) -> str:
        """The config as JSON (without ``progress``): each part an object of its fields."""
        data = _plain(self)
        del data["progress"]
        return json.dumps(data, indent=2)

    @classmethod
    def from_json(cls, text: str) -> PipelineConfig:
        """The config :meth:`to_json` wrote, or one of the flat layout written before configs were
        made of parts (``source_path``, ``schema``, ``pk``...: :func:`_from_flat`).
        PipelineConfigError on unknown or missing fields."""
        data = json.loads(text)
        try:
            if isinstance(data, dict) and "source_path" in data:
                data = _from_flat(data)
            config: PipelineConfig = _build(cls, data)
        except PipelineConfigError:
            raise
        except (KeyError, TypeError, ValueError) as error:
            raise PipelineConfigError(f"bad pipeline config: {error}") from error
        return config

    def __post_init__(self) -> None:
        check_config(self)

    @property
    def dead_letters(self) -> Path:
        """The dead-letter directory of ``on_error="skip"`` (default ``<checkpoint>/dead-letter``)."""
        given = self.source.dead_letter
        return given if given is not None else self.checkpoint / "dead-letter"

    def with_progress(self, progress: Callable[[BatchProgress], None] | None) -> PipelineConfig:
        """A copy reporting to ``progress``."""
        return replace(self, progress=progress)


def _plain(value: Any) -> Any:
    """``value`` as JSON values: a dataclass as an object of its fields, an enum as its value."""
    if is_dataclass(value) and not isinstance(value, type):
        return {item.name: _plain(getattr(value, item.name)) for item in fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return value


def _build(cls: type[Any], data: Any) -> Any:
    """The dataclass ``cls`` from the object :func:`_plain` made of one, by its field types."""
    if not isinstance(data, dict):
        raise PipelineConfigError(f"{cls.__name__} must be an object, got {data!r}")
    known = {item.name for item in fields(cls)} - {"progress"}
    unknown = set(data) - known
    if unknown:
        raise PipelineConfigError(f"unknown {cls.__name__} fields: {sorted(unknown)}")
    hints = get_type_hints(cls)
    return cls(**{name: _value(hints[name], value) for name, value in data.items()})


def _value(kind: Any, value: Any) -> Any:
    if value is None:
        return None
    if get_origin(kind) is UnionType:  # X | None
        (kind,) = (arg for arg in get_args(kind) if arg is not type(None))
    if get_origin(kind) is tuple:
        return tuple(_value(get_args(kind)[0], item) for item in value)
    if kind is SourceFormat:
        return source_format(value)  # either spelling (formats.PIPELINE_NAMES)
    if kind is Path:
        return Path(value)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return kind(value)
    if isinstance(kind, type) and is_dataclass(kind):
        return _build(kind, value)
    return value


_FLAT: dict[str, tuple[str, str]] = {
    "source_path": ("source", "path"),
    "source_format": ("source", "format"),
    "op_column": ("source", "op_column"),
    "arrival_column": ("source", "order_column"),
    "ts_column": ("source", "ts_column"),
    "on_error": ("source", "on_error"),
    "dead_letter_dir": ("source", "dead_letter"),
    "sink_url": ("sink", "url"),
    "table": ("sink", "table"),
    "pk": ("", "primary_key"),
    "checkpoint_dir": ("", "checkpoint"),
    "strategy": ("settings", "strategy"),
    "threshold_high": ("settings", "threshold_high"),
    "threshold_low": ("settings", "threshold_low"),
    "ttl": ("settings", "ttl"),
    "miss_rows": ("settings", "miss_rows"),
    "master": ("spark", "master"),
    "shuffle_partitions": ("spark", "shuffle_partitions"),
    "max_files_per_trigger": ("spark", "max_files_per_trigger"),
    "key_buckets": ("spark", "key_buckets"),
    "state_layout": ("spark", "state_layout"),
    "state_inline_bytes": ("spark", "state_inline_bytes"),
    "spark_conf": ("spark", "conf"),
}
"""A flat config's field -> (its part, the part's field; "": the config's own field). The
fields not named here (``upsert_key``, ``materialize``, the run's options) kept their names;
``schema`` and ``columns`` become ``source.columns``."""


def _from_flat(flat: dict[str, Any]) -> dict[str, Any]:
    """A flat config (``source_path``, ``schema``, ``pk``, ``sink_url``...; JSON Lines spelled
    ``json``; no format: JSON Lines) as the parts' layout, for :meth:`PipelineConfig.from_json`.
    The source's columns are ``columns`` (default: every field of ``schema`` but op, arrival and
    ts), typed as ``schema`` says; its record is read in :meth:`~.parts.SourceSpec.ddl`'s order."""
    data: dict[str, Any] = {
        "source": {"format": DEFAULT.value},
        "sink": {"table": "sink"},
        "settings": {"strategy": PIPELINE_SETTINGS.strategy.value, "backend": Backend.SPARK.value},
        "spark": {},
    }
    types = _ddl_fields(flat.pop("schema"))
    names = flat.pop("columns", None)
    for name, value in flat.items():
        part, field_name = _FLAT.get(name, ("", name))
        (data[part] if part else data)[field_name] = value
    special = {flat.get("op_column", "op"), flat.get("arrival_column", "seq"), flat.get("ts_column")}
    names = names if names is not None else [name for name in types if name not in special]
    data["source"]["columns"] = [{"name": name, "type": types[name]} for name in names]
    return data


def _ddl_fields(ddl: str) -> dict[str, str]:
    """``"seq LONG, `op` STRING, d DECIMAL(10,2)"`` -> ``{"seq": "long", "op": "string", "d":
    "decimal(10,2)"}``: a flat config's ``schema``, field by field (commas inside parentheses
    or angle brackets belong to the type)."""
    found: dict[str, str] = {}
    depth, start = 0, 0
    for index, char in enumerate(ddl + ","):
        depth += char in "(<"
        depth -= char in ")>"
        if char == "," and depth == 0:
            name, _, kind = ddl[start:index].strip().partition(" ")
            found[name.strip("`")] = kind.strip().lower()
            start = index + 1
    return found


def check_config(config: PipelineConfig) -> None:
    """PipelineConfigError naming the first field of ``config`` that cannot run: everything that
    can be known without Spark, so that a config is refused when it is made, not once Spark has
    started. O(len(columns) * len(keys) + len(sink.url))."""
    spark = config.spark
    if spark.key_buckets is not None and spark.key_buckets < 1:
        raise PipelineConfigError(f"spark.key_buckets must be >= 1 (or None), got {spark.key_buckets}")
    if spark.shuffle_partitions < 1:
        raise PipelineConfigError(f"spark.shuffle_partitions must be >= 1, got {spark.shuffle_partitions}")
    if spark.max_files_per_trigger is not None and spark.max_files_per_trigger < 1:
        raise PipelineConfigError(
            f"spark.max_files_per_trigger must be >= 1 (or None), got {spark.max_files_per_trigger}"
        )
    if spark.state_inline_bytes < 0:
        raise PipelineConfigError(f"spark.state_inline_bytes must be >= 0, got {spark.state_inline_bytes}")
    if spark.state_layout not in STATE_LAYOUTS:
        raise PipelineConfigError(
            f"spark.state_layout must be one of {', '.join(STATE_LAYOUTS)}, got {spark.state_layout!r}"
        )
    if not config.primary_key:
        raise PipelineConfigError("the sink primary key (primary_key) needs at least one column")
    columns = config.source.column_names
    for name in (*config.primary_key, *config.upsert_key):
        if name not in columns:
            raise PipelineConfigError(f"key column {name!r} is not one of the row columns {list(columns)}")
    if config.source.on_error not in ON_ERROR:
        raise PipelineConfigError(
            f"source.on_error must be one of {', '.join(ON_ERROR)}, got {config.source.on_error!r}"
        )
    try:
        check_url(config.sink.url)
    except SinkUrlError as error:
        raise PipelineConfigError(f"sink.url: {error}") from None
    try:
        parse_duration_ms(config.trigger_interval)
    except ValueError as error:
        raise PipelineConfigError(f"trigger_interval: {error}") from None
    settings = config.settings
    if settings.strategy not in PIPELINE_STRATEGIES:
        names = ", ".join(strategy.value for strategy in PIPELINE_STRATEGIES)
        raise PipelineConfigError(
            f"strategy {settings.strategy.value} does not run on the pipeline (Spark's state store has no "
            f"ordered seek); use one of {names}"
        )
    if settings.ttl.enabled and settings.ttl.time_domain is not TimeDomain.PROCESSING_TIME:
        raise PipelineConfigError(
            "the Spark pipeline supports processing-time state TTL only "
            "(upsertmat.state.ttl.time-domain = processing_time); see docs/spark.md"
        )
    if config.conflict.compacting and config.source.ts_column is None:
        raise PipelineConfigError(
            f"table.exec.sink.conflict-strategy={config.conflict.value} compacts at event-time watermarks: "
            "set source.ts_column (the changes' event time in ms)"
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
