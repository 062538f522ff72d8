"""Job files (YAML) to :class:`~upsertmat.jobs.model.JobSpec`, with layered configuration.

A job file::

    name: users-levels
    source:
      path: changes.jsonl          # relative paths are relative to the job file
      format: jsonl                # jsonl (default), parquet, csv, debezium-json, canal-json, maxwell-json
                                   # (the table of formats: upsertmat/spark/sources/formats.py)
      columns: [{id: long}, {level: long}, {attr: string}]
      op-column: op                # default op
      order-column: seq            # default seq: the arrival order
      on-error: fail               # fail (default) or skip: bad rows go to the dead-letter directory
      dead-letter: bad-rows        # default <checkpoint>/dead-letter; relative to the output base
    keys:
      primary-key: [id]            # the sink primary key (column names)
      upsert-key: []               # default: none (whole-row matching)
    sink:
      url: sink.db                 # SQLite file (default <name>.db), sqlite:///…, or postgresql://…
      table: users                 # default: the job name with - replaced by _
      # internal: true             # instead of url: the result stays inside the client/gateway
    checkpoint: checkpoint         # default <name>-checkpoint
    materialize: true              # false: the raw changelog goes to the sink
    spark: {master: "local[2]", shuffle-partitions: 2, max-files-per-trigger: null, key-buckets: null,
            state-layout: log, ui: false}  # ui: the Spark UI (on 127.0.0.1 for a local master)
    config:                        # configuration keys, flat or nested (as upsertmat replay)
      table.exec.sink.upsert-materialize-strategy.type: MAP
      table.exec.state.ttl: 1 h

Paths: the source is relative to the job file (the data ships beside it); the job's outputs,
the sink file and the checkpoint, are relative to the *output base* (the working directory for
``upsertmat run``; the job's directory under a gateway's data root), so running a job shipped in
a read-only or version-controlled folder writes nothing there. SQLite URLs follow SQLAlchemy's
convention (``sqlite:///relative.db``, ``sqlite:////absolute.db``; :mod:`upsertmat.sinks`).

Configuration layers, lowest first: the built-in defaults (``upsertmat/data/defaults.yaml``)
< the pipeline's defaults (``state.backend.type: spark``, strategy ``VALUE``) < the job
file's ``config`` < the command line (``--config FILE`` < ``--set KEY=VALUE`` <
``--strategy/--backend/--ttl``).
Every problem is a :class:`JobError` naming the file and the field.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from ..defaults import DEFAULTS_SOURCE, default_layer
from ..impls.config import (
    BACKEND,
    STRATEGY,
    THRESHOLD_HIGH,
    THRESHOLD_LOW,
    TIME_DOMAIN,
    TTL,
    UPDATE_TYPE,
    ConfigError,
    build_settings,
    flatten,
)
from ..impls.settings import Backend, Settings, TimeDomain
from ..sinks import SinkUrlError, resolve_url
from ..spark.config import PIPELINE_STRATEGIES, STATE_LAYOUTS
from ..spark.sources.formats import DEFAULT, NAMES
from .model import (
    COLUMN_TYPES,
    INTERNAL_URL,
    Column,
    JobSpec,
    SinkSpec,
    SourceFormat,
    SourceSpec,
    SparkOptions,
)

Layer = tuple[str, Mapping[str, Any]]
PIPELINE_DEFAULTS: Layer = (
    "the pipeline's defaults",
    {BACKEND: Backend.SPARK.value, STRATEGY: "VALUE"},
)
"""The pipeline's state lives in Spark; VALUE is its default strategy (per-element TTL, and one
state read and one write per sink key and batch). Every strategy that runs on Spark applies TTL
with its own granularity there too: LEGACY per sink key, the others per element."""

_TOP = ("name", "source", "keys", "sink", "checkpoint", "materialize", "spark", "config")
_SOURCE = ("path", "format", "columns", "op-column", "order-column", "on-error", "dead-letter")
ON_ERROR = ("fail", "skip")
_KEYS = ("primary-key", "upsert-key")
_SINK = ("url", "table", "internal")
_SPARK = (
    "master",
    "shuffle-partitions",
    "max-files-per-trigger",
    "key-buckets",
    "state-layout",
    "state-inline-bytes",
    "ui",
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class JobError(ConfigError):
    """A job file or job option that cannot be used; the message names the file and field."""


def _mapping(value: Any, where: str, allowed: Sequence[str]) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise JobError(f"{where} must be a mapping, got {value!r}")
    unknown = [key for key in value if key not in allowed]
    if unknown:
        raise JobError(f"unknown key {unknown[0]!r} in {where}; known keys: {', '.join(allowed)}")
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise JobError(f"{where} must be a non-empty string, got {value!r}")
    return value.strip()


def _identifier(value: Any, where: str) -> str:
    text = _text(value, where)
    if not _IDENTIFIER.match(text):
        raise JobError(f"{where} must be an identifier (letters, digits, _), got {text!r}")
    return text


def _names(value: Any, where: str, columns: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise JobError(f"{where} must be a list of column names, got {value!r}")
    names = tuple(_text(item, where) for item in value)
    for name in names:
        if name not in columns:
            raise JobError(f"{where} names {name!r}, which is not a source column ({', '.join(columns)})")
    if len(set(names)) != len(names):
        raise JobError(f"{where} names a column twice: {list(names)}")
    return names


def _columns(value: Any, where: str) -> tuple[Column, ...]:
    if not isinstance(value, list) or not value:
        raise JobError(f"{where} must be a non-empty list like [{{id: long}}, {{name: string}}]")
    columns: list[Column] = []
    for item in value:
        if not isinstance(item, Mapping) or len(item) != 1:
            raise JobError(f"each entry of {where} must be one 'name: type' pair, got {item!r}")
        ((name, kind),) = item.items()
        name = _identifier(name, f"a column name in {where}")
        kind_text = str(kind).strip().lower()
        if kind_text not in COLUMN_TYPES:
            raise JobError(
                f"column {name!r} in {where} has unknown type {kind!r}; known: {', '.join(COLUMN_TYPES)}"
            )
        columns.append(Column(name, kind_text))
    names = [column.name for column in columns]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise JobError(f"{where} declares column {duplicates[0]!r} twice")
    return tuple(columns)


def _positive(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise JobError(f"{where} must be a positive integer, got {value!r}")
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise JobError(f"{where} must be a non-negative integer, got {value!r}")
    return value


def _spark(value: Any, where: str) -> SparkOptions:
    data = _mapping(value, where, _SPARK)
    files = data.get("max-files-per-trigger")
    buckets = data.get("key-buckets")
    return SparkOptions(
        master=_text(data.get("master", "local[2]"), f"{where}.master"),
        shuffle_partitions=_positive(data.get("shuffle-partitions", 2), f"{where}.shuffle-partitions"),
        max_files_per_trigger=None if files is None else _positive(files, f"{where}.max-files-per-trigger"),
        key_buckets=None if buckets is None else _positive(buckets, f"{where}.key-buckets"),
        state_layout=_choice(data.get("state-layout", "log"), STATE_LAYOUTS, f"{where}.state-layout"),
        state_inline_bytes=_count(
            data.get("state-inline-bytes", SparkOptions.state_inline_bytes), f"{where}.state-inline-bytes"
        ),
        ui=_flag(data.get("ui", False), f"{where}.ui"),
    )


def _choice(value: Any, choices: tuple[str, ...], where: str) -> str:
    if value not in choices:
        raise JobError(f"{where} must be one of {', '.join(choices)}, got {value!r}")
    return str(value)


def _flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise JobError(f"{where} must be true or false, got {value!r}")
    return value


def _path(value: Any, where: str, base: Path) -> Path:
    path = Path(_text(value, where)).expanduser()
    return path if path.is_absolute() else base / path


def _sink_url(value: Any, where: str, base: Path) -> str:
    try:
        return resolve_url(_text(value, where), base)
    except SinkUrlError as error:
        raise JobError(f"{where}: {error}") from None


def read_job_document(path: Path) -> dict[str, Any]:
    """The YAML mapping of a job file. JobError if unreadable, not YAML or not a mapping."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise JobError(f"cannot read job file {path}: {error.strerror}") from error
    except yaml.YAMLError as error:
        raise JobError(f"job file {path} is not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise JobError(f"job file {path} must hold a mapping (name, source, keys, sink, …)")
    return data


def settings_layers(
    job_config: Mapping[str, Any], job_source: str, cli: Sequence[Layer], below_job: Sequence[Layer] = ()
) -> list[Layer]:
    """All configuration layers, lowest first: defaults, pipeline defaults, ``below_job`` (a
    gateway's service defaults and session), the job's, the CLI's (or the request's)."""
    layers: list[Layer] = [(DEFAULTS_SOURCE, default_layer()), PIPELINE_DEFAULTS, *below_job]
    if job_config:
        layers.append((job_source, job_config))
    layers.extend(cli)
    return layers


def resolve_settings(layers: Sequence[Layer]) -> Settings:
    """Settings of the layers that the pipeline can run; JobError (naming the layer that chose it)
    unless the backend is ``spark`` (the pipeline's state store), the strategy one that runs
    there (:data:`PIPELINE_STRATEGIES`: not SORTED, whose ordered seek Spark's map state lacks)
    and the state TTL, if any, in processing time. These are refused here, where a job is loaded,
    and not once Spark has started."""
    try:
        settings = build_settings(layers)
    except JobError:
        raise
    except ConfigError as error:
        raise JobError(str(error)) from None

    def chosen(key: str) -> str:
        return next((source for source, layer in reversed(layers) if key in layer), DEFAULTS_SOURCE)

    if settings.backend is not Backend.SPARK:
        raise JobError(
            f"the pipeline keeps the materializer's state in Spark's state store: {BACKEND} must be "
            f"spark, got {settings.backend.value} (from {chosen(BACKEND)})"
        )
    if settings.strategy not in PIPELINE_STRATEGIES:
        names = ", ".join(strategy.value for strategy in PIPELINE_STRATEGIES)
        raise JobError(
            f"strategy {settings.strategy.value} does not run on the pipeline (Spark's state store has no "
            f"ordered seek): {STRATEGY} must be one of {names} (from {chosen(STRATEGY)})"
        )
    if settings.ttl.enabled and settings.ttl.time_domain is not TimeDomain.PROCESSING_TIME:
        raise JobError(
            f"the pipeline supports processing-time state TTL only: {TIME_DOMAIN} must be "
            f"processing_time, got {settings.ttl.time_domain.value} (from {chosen(TIME_DOMAIN)})"
        )
    return settings


def config_strings(settings: Settings) -> dict[str, str]:
    """The resolved configuration keys as display strings (``table.exec.state.ttl: '0 ms'``)."""
    values = {
        STRATEGY: settings.strategy.value,
        BACKEND: settings.backend.value,
        TTL: f"{settings.ttl.ttl_ms} ms",
        TIME_DOMAIN: settings.ttl.time_domain.value,
        UPDATE_TYPE: settings.ttl.update_type.value,
    }
    if settings.threshold_high is not None:
        values[THRESHOLD_HIGH] = str(settings.threshold_high)
    if settings.threshold_low is not None:
        values[THRESHOLD_LOW] = str(settings.threshold_low)
    return values


def job_from_document(
    data: Mapping[str, Any],
    *,
    base: Path,
    where: str,
    cli_layers: Sequence[Layer] = (),
    output_base: Path | None = None,
    internal_url: str | None = None,
    below_job: Sequence[Layer] = (),
) -> JobSpec:
    """Validate a job document (the parsed YAML) and resolve it with the CLI layers on top.

    ``base`` is the directory the source path is resolved against, ``output_base`` (default
    ``base``) the one the sink file and the checkpoint are; ``where`` names the document in
    messages. ``internal_url``: the database of a ``sink: {internal: true}`` job (None: such a
    job keeps the placeholder URL ``internal:`` for the client to fill in). O(columns + keys).
    """
    outputs = base if output_base is None else output_base
    top = _mapping(data, where, _TOP)
    name = _text(top.get("name", "job"), f"{where}: name")
    if "source" not in top:
        raise JobError(f"{where} has no source")
    source_data = _mapping(top["source"], f"{where}: source", _SOURCE)
    if "path" not in source_data or "columns" not in source_data:
        raise JobError(f"{where}: source needs a path and columns")
    format_text = str(source_data.get("format", DEFAULT.value)).strip().lower()
    try:
        source_format = SourceFormat(format_text)  # job files spell each format as the table does
    except ValueError:
        known = ", ".join(NAMES)
        raise JobError(f"{where}: source.format {format_text!r} is not one of {known}") from None
    columns = _columns(source_data["columns"], f"{where}: source.columns")
    on_error = source_data.get("on-error", "fail")
    if on_error not in ON_ERROR:
        raise JobError(f"{where}: source.on-error must be fail or skip, got {on_error!r}")
    dead_letter = source_data.get("dead-letter")
    source = SourceSpec(
        path=_path(source_data["path"], f"{where}: source.path", base),
        format=source_format,
        columns=columns,
        op_column=_identifier(source_data.get("op-column", "op"), f"{where}: source.op-column"),
        order_column=_identifier(source_data.get("order-column", "seq"), f"{where}: source.order-column"),
        on_error=on_error,
        dead_letter=None
        if dead_letter is None
        else _path(dead_letter, f"{where}: source.dead-letter", outputs),
    )
    names = source.column_names
    for meta in (source.op_column, source.order_column):
        if meta in names:
            raise JobError(f"{where}: {meta!r} is both a data column and the op/order column")
    if source.op_column == source.order_column:
        raise JobError(f"{where}: source.op-column and source.order-column must differ")
    keys = _mapping(top.get("keys", {}), f"{where}: keys", _KEYS)
    if "primary-key" not in keys:
        raise JobError(f"{where}: keys.primary-key is required (the sink's primary key columns)")
    primary_key = _names(keys["primary-key"], f"{where}: keys.primary-key", names)
    if not primary_key:
        raise JobError(f"{where}: keys.primary-key needs at least one column")
    upsert_key = _names(keys.get("upsert-key", []), f"{where}: keys.upsert-key", names)
    sink_data = _mapping(top.get("sink", {}), f"{where}: sink", _SINK)
    default_table = re.sub(r"\W", "_", name)
    internal = _flag(sink_data.get("internal", False), f"{where}: sink.internal")
    if internal and "url" in sink_data:
        raise JobError(
            f"{where}: sink.internal and sink.url exclude each other (internal: the client keeps it)"
        )
    sink = SinkSpec(
        url=(internal_url or INTERNAL_URL)
        if internal
        else _sink_url(sink_data.get("url", f"{default_table}.db"), f"{where}: sink.url", outputs),
        table=_identifier(sink_data.get("table", default_table), f"{where}: sink.table"),
        internal=internal,
    )
    materialize = top.get("materialize", True)
    if not isinstance(materialize, bool):
        raise JobError(f"{where}: materialize must be true or false, got {materialize!r}")
    config = top.get("config") or {}
    if not isinstance(config, Mapping):
        raise JobError(f"{where}: config must be a mapping of configuration keys")
    settings = resolve_settings(settings_layers(flatten(config), where, cli_layers, below_job))
    return JobSpec(
        name=name,
        source=source,
        sink=sink,
        primary_key=primary_key,
        upsert_key=upsert_key,
        checkpoint=_path(
            top.get("checkpoint", f"{default_table}-checkpoint"), f"{where}: checkpoint", outputs
        ),
        settings=settings,
        materialize=materialize,
        spark=_spark(top.get("spark", {}), f"{where}: spark"),
        config=config_strings(settings),
    )


def load_job(path: Path, cli_layers: Sequence[Layer] = (), output_base: Path | None = None) -> JobSpec:
    """Load and resolve the job file at ``path``; ``cli_layers`` are the command line's layers.

    The source is relative to the job file, the outputs (sink file, checkpoint) to
    ``output_base`` (default: the working directory)."""
    data = read_job_document(path)
    return job_from_document(
        data,
        base=path.resolve().parent,
        where=f"job file {path}",
        cli_layers=cli_layers,
        output_base=Path.cwd() if output_base is None else output_base,
    )


def check_source(path: Path, what: str) -> None:
    """JobError unless ``path``, a job's ``source.path``, is a directory this process can list:
    what the pipeline reads (Spark watches a directory; a missing one fails only once Spark has
    started, a file as "basePath must be a directory"). For the commands that read the source
    (``run``, ``execute-plan``), before Spark starts; loading a job does not check it, since a
    job file may be written before its data (``compile-plan``; a gateway checks its own). ``what``
    names the field that set the path (``job file J: source.path``, ``--source``). One ``stat``
    and one directory read."""
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            with os.scandir(path) as entries:
                next(entries, None)
    except FileNotFoundError:
        raise JobError(f"{what} {path} does not exist (it must be a directory of change files)") from None
    except OSError as error:
        raise JobError(f"{what} {path} cannot be read: {error.strerror or error}") from None
    if not stat.S_ISDIR(mode):
        raise JobError(
            f"{what} {path} is not a directory: the pipeline reads every file in a directory "
            "(put the file in one and name the directory)"
        )


def with_overrides(
    job: JobSpec,
    *,
    sink_url: str | None = None,
    table: str | None = None,
    checkpoint: Path | None = None,
    source_path: Path | None = None,
    materialize: bool | None = None,
    on_error: str | None = None,
) -> JobSpec:
    """``job`` with command-line overrides (relative paths are relative to the working directory)."""
    cwd = Path.cwd()
    if sink_url is not None:
        job = replace(job, sink=replace(job.sink, url=_sink_url(sink_url, "--sink", cwd), internal=False))
    if table is not None:
        job = replace(job, sink=replace(job.sink, table=_identifier(table, "--table")))
    if checkpoint is not None:
        job = replace(job, checkpoint=_path(str(checkpoint), "--checkpoint", cwd))
    if source_path is not None:
        job = replace(job, source=replace(job.source, path=_path(str(source_path), "--source", cwd)))
    if materialize is not None:
        job = replace(job, materialize=materialize)
    if on_error is not None:
        if on_error not in ON_ERROR:
            raise JobError(f"--on-error must be fail or skip, got {on_error!r}")
        job = replace(job, source=replace(job.source, on_error=on_error))
    return job
