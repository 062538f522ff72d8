"""Job files: loading, layered configuration, errors (no Spark needed)."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from upsertmat.cli import build_parser, main
from upsertmat.commands.job_options import job_from_args
from upsertmat.impls.settings import Backend, ConflictBehavior, Strategy, TimeDomain, TtlSettings
from upsertmat.jobs.loader import JobError, load_job, with_overrides
from upsertmat.jobs.model import INTERNAL_URL, SourceFormat

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "users-levels.yaml"

MINIMAL = """\
name: t
source:
  path: data
  columns: [{id: long}, {level: long}, {badge: string}]
keys:
  primary-key: [id]
"""


def write_job(tmp_path: Path, text: str) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "job.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_example_job_reads_beside_the_file_and_writes_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    job = load_job(EXAMPLE)
    assert job.name == "users-levels"
    assert job.source.path == EXAMPLE.parent / "users-levels"
    assert job.source.format is SourceFormat.JSONL
    assert job.source.column_names == ("id", "level", "badge")
    assert job.source.ddl().startswith("`op` STRING, `seq` BIGINT, `id` BIGINT")
    assert job.primary_key == ("id",) and job.upsert_key == ()
    assert job.pk_indexes() == (0,)
    # the outputs go to the working directory, never into the clone's examples/
    assert job.sink.sqlite_path() == tmp_path / "users-levels.db"
    assert job.sink.table == "users"
    assert job.checkpoint == tmp_path / "users-levels-checkpoint"
    assert (
        load_job(EXAMPLE, output_base=tmp_path / "w").checkpoint == tmp_path / "w" / "users-levels-checkpoint"
    )
    assert job.settings.strategy is Strategy.VALUE
    assert job.settings.backend is Backend.SPARK
    assert job.settings.ttl.ttl_ms == 0
    assert job.config["table.exec.state.ttl"] == "0 ms"


def test_defaults_of_a_minimal_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    job = load_job(write_job(tmp_path, MINIMAL))
    assert job.source.op_column == "op" and job.source.order_column == "seq"
    assert job.sink.url == str(tmp_path / "t.db") and job.sink.table == "t"
    assert job.checkpoint == tmp_path / "t-checkpoint"
    assert job.settings.backend is Backend.SPARK  # the pipeline's default over the built-in heap
    assert job.settings.strategy is Strategy.VALUE  # the pipeline's default over the built-in LEGACY
    assert job.materialize is True
    assert job.spark.master == "local[2]" and job.spark.shuffle_partitions == 2


def parse(*argv: str) -> object:
    return job_from_args(build_parser().parse_args(["run", *argv]))


def test_layers_defaults_job_config_set_shortcuts(tmp_path: Path) -> None:
    job_file = write_job(tmp_path, MINIMAL + "config:\n  table.exec.state.ttl: 10 s\n")
    config = tmp_path / "c.yaml"
    config.write_text("table.exec.state.ttl: 20 s\ntable.exec.sink.upsert-materialize-strategy.type: MAP\n")
    job = job_from_args(build_parser().parse_args(["run", str(job_file)]))
    assert job.settings.ttl.ttl_ms == 10_000  # job file over defaults
    job = job_from_args(build_parser().parse_args(["run", str(job_file), "--config", str(config)]))
    assert (job.settings.ttl.ttl_ms, job.settings.strategy) == (20_000, Strategy.MAP)  # --config over job
    args = ["run", str(job_file), "--config", str(config), "--set", "table.exec.state.ttl=30 s"]
    job = job_from_args(build_parser().parse_args(args))
    assert job.settings.ttl.ttl_ms == 30_000  # --set over --config
    job = job_from_args(build_parser().parse_args([*args, "--ttl", "1 min", "--strategy", "value"]))
    assert (job.settings.ttl.ttl_ms, job.settings.strategy) == (60_000, Strategy.VALUE)  # shortcuts on top
    assert job.config["table.exec.state.ttl"] == "60000 ms"


def test_overrides_replace_job_fields(tmp_path: Path) -> None:
    job = load_job(write_job(tmp_path, MINIMAL))
    job = with_overrides(
        job, sink_url="postgresql://u@localhost:5432/db", table="other", checkpoint=tmp_path / "ck",
        materialize=False,
    )  # fmt: skip
    assert job.sink.kind.name == "postgresql" and job.sink.table == "other"
    assert job.checkpoint == tmp_path / "ck" and job.materialize is False
    with pytest.raises(ValueError, match="not a SQLite sink"):
        job.sink.sqlite_path()


def test_sqlite_url_forms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQLAlchemy's convention: sqlite:///relative, sqlite:////absolute; relative to the working directory
    monkeypatch.chdir(tmp_path)
    cases = (("sqlite:////abs/x.db", Path("/abs/x.db")), ("sqlite:///r/x.db", tmp_path / "r/x.db"))
    for url, expected in (*cases, ("rel.db", tmp_path / "rel.db")):
        job = load_job(write_job(tmp_path / "jobs", MINIMAL + f"sink: {{url: '{url}'}}\n"))
        assert job.sink.sqlite_path() == expected
        overridden = with_overrides(job, sink_url=url)
        assert overridden.sink.sqlite_path() == expected  # the command line means the same file
    for url in ("sqlite://x.db", "sqlite:", "sqlite:///"):
        with pytest.raises(JobError, match="unsupported SQLite URL"):
            load_job(write_job(tmp_path / "jobs", MINIMAL + f"sink: {{url: '{url}'}}\n"))


def test_the_inline_bound_of_the_bucket_state_is_read_from_the_spark_part(tmp_path: Path) -> None:
    assert load_job(write_job(tmp_path, MINIMAL)).spark.state_inline_bytes == 32768
    job = load_job(write_job(tmp_path, MINIMAL + "spark: {key-buckets: 8, state-inline-bytes: 0}\n"))
    assert job.spark.state_inline_bytes == 0


def test_internal_sink_has_no_url_until_a_client_gives_one(tmp_path: Path) -> None:
    job = load_job(write_job(tmp_path, MINIMAL + "sink: {internal: true}\n"))
    assert job.sink.internal and job.sink.url == INTERNAL_URL
    with pytest.raises(JobError, match="exclude each other"):
        load_job(write_job(tmp_path, MINIMAL + "sink: {internal: true, url: x.db}\n"))


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ("colour: red\n", "unknown key 'colour' in job file"),
        ("config:\n  table.exec.state.tll: 1 s\n", "unknown configuration key 'table.exec.state.tll'"),
        ("config:\n  table.exec.state.ttl: 5 parsecs\n", "bad value '5 parsecs' for table.exec.state.ttl"),
        ("config:\n  state.backend.type: heap\n", "state.backend.type must be spark, got heap"),
        ("materialize: sometimes\n", "materialize must be true or false"),
        ("spark: {shuffle-partitions: 0}\n", "shuffle-partitions must be a positive integer"),
        ("spark: {state-inline-bytes: -5}\n", "state-inline-bytes must be a non-negative integer, got -5"),
        ("spark: {state-inline-bytes: true}\n", "state-inline-bytes must be a non-negative integer, got Tr"),
        ("sink: {url: 'mysql://x'}\n", "unsupported database URL"),
        ("sink: {table: 'drop table'}\n", "sink.table must be an identifier"),
    ],
)
def test_job_errors_name_the_problem(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(JobError, match=message.replace("(", r"\(")):
        load_job(write_job(tmp_path, MINIMAL + extra))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- just a list\n", "must hold a mapping"),
        ("name: t\n", "has no source"),
        (MINIMAL.replace("[id]", "[nope]"), "names 'nope', which is not a source column"),
        (MINIMAL.replace("[id]", "[]"), "needs at least one column"),
        (MINIMAL.replace("{badge: string}", "{id: string}"), "declares column 'id' twice"),
        (MINIMAL.replace("{badge: string}", "{badge: varchar}"), "unknown type 'varchar'"),
        (MINIMAL.replace("path: data", "path: data\n  format: avro"), "source.format 'avro' is not one of"),
        (MINIMAL.replace("path: data", "path: data\n  op-column: id"), "both a data column and the op/order"),
        (MINIMAL.replace("keys:\n  primary-key: [id]\n", ""), "keys.primary-key is required"),
        ("a: [unclosed\n", "is not valid YAML"),
    ],
)
def test_malformed_job_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(JobError, match=message):
        load_job(write_job(tmp_path, text))


def test_cli_reports_job_errors_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    job_file = write_job(tmp_path, MINIMAL)
    assert main(["run", str(job_file), "--set", "no.such.key=1"]) == 2
    assert "upsertmat run: unknown configuration key 'no.such.key' (from --set no.such.key=1)" in (
        capsys.readouterr().err
    )
    assert main(["run", str(job_file), "--backend", "rocksdb"]) == 2
    assert "must be spark, got rocksdb (from --backend rocksdb)" in capsys.readouterr().err
    assert main(["run", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read job file" in capsys.readouterr().err


def _one_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_what_the_pipeline_cannot_run_is_refused_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SORTED (any layer), event-time TTL: one line, exit 2, when the job is loaded (no "starting
    Spark" line, nothing written) by run, compile-plan, execute-plan and demo."""
    monkeypatch.chdir(tmp_path)
    job_file = write_job(tmp_path, MINIMAL)
    sorted_job = write_job(
        tmp_path / "sorted", MINIMAL + "config: {table.exec.sink.upsert-materialize-strategy.type: sorted}\n"
    )
    cases = [
        (["run", str(job_file), "--strategy", "SORTED"], "(from --strategy SORTED)"),
        (
            ["run", str(job_file), "--set", "table.exec.sink.upsert-materialize-strategy.type=SORTED"],
            "(from --set",
        ),
        (["run", str(sorted_job)], f"(from job file {sorted_job})"),
        (
            ["compile-plan", str(job_file), "-o", "plan.json", "--strategy", "sorted"],
            "(from --strategy sorted)",
        ),
        (["demo", "--strategy", "SORTED"], "(from --strategy SORTED)"),
    ]
    for argv, source in cases:
        assert main(argv) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(f"upsertmat {argv[0]}: strategy SORTED does not run on the pipeline"), line
        assert "must be one of LEGACY, VALUE, MAP, ADAPTIVE" in line and source in line, line
    assert (
        main(["run", str(job_file), "--set", "upsertmat.state.ttl.time-domain=event_time", "--ttl", "1 s"])
        == 2
    )
    line = _one_line(capsys.readouterr().err)
    assert "processing-time state TTL only" in line and "got event_time (from --set" in line, line
    # A plan edited to SORTED is refused by execute-plan (and explain-plan) the same way.
    assert main(["compile-plan", str(job_file), "-o", "plan.json"]) == 0
    plan = json.loads((tmp_path / "plan.json").read_text())
    (materializer,) = [node for node in plan["nodes"] if node["type"] == "sink-materializer"]
    materializer["strategy"] = "SORTED"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    capsys.readouterr()
    for command in ("execute-plan", "explain-plan"):
        assert main([command, "plan.json"]) == 2
        line = _one_line(capsys.readouterr().err)
        assert "strategy SORTED does not run on the pipeline" in line and "node" in line, line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.yaml", "plan.json", "sorted"]


def test_a_source_that_is_not_a_readable_directory_is_refused_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A source.path that does not exist, is a file (Spark: "basePath must be a directory", exit 70
    after Spark started) or cannot be read: one line naming the job file (or --source) and the
    path, exit 2, no "starting Spark" line, by run and execute-plan; compile-plan, which reads
    no source, writes the plan."""
    monkeypatch.chdir(tmp_path)
    job_file = write_job(tmp_path, MINIMAL)
    data = tmp_path / "data"
    where = f"job file {job_file}: source.path {data}"
    too_long = tmp_path / ("x" * 300)  # a name past NAME_MAX: the stat itself fails
    cases = [
        (["run", str(job_file)], f"upsertmat run: {where} does not exist (it must be a directory"),
        (
            ["run", str(job_file), "--source", "elsewhere"],
            f"--source {tmp_path / 'elsewhere'} does not exist",
        ),
        (["run", str(job_file), "--source", str(too_long)], f"--source {too_long} cannot be read: File name"),
    ]
    for argv, expected in cases:
        assert main(argv) == 2, argv
        line = _one_line(capsys.readouterr().err)
        assert expected in line, line
    data.write_text('{"op": "+I", "seq": 1, "id": 1, "level": 1, "badge": "a"}\n', encoding="utf-8")
    assert main(["run", str(job_file)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line == (
        f"upsertmat run: {where} is not a directory: the pipeline reads every file in a directory "
        "(put the file in one and name the directory)"
    )
    data.unlink()
    assert main(["compile-plan", str(job_file), "-o", "plan.json"]) == 0
    capsys.readouterr()
    assert main(["execute-plan", "plan.json"]) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"upsertmat execute-plan: plan plan.json: source.path {data} does not exist"), line
    assert sorted(path.name for path in tmp_path.iterdir()) == ["job.yaml", "plan.json"]


def test_demo_dir_that_cannot_be_a_directory_is_refused_before_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    for directory, expected in [
        (tmp_path / "file", f"upsertmat demo: --dir {tmp_path / 'file'} is not a directory"),
        (
            tmp_path / "file" / "sub",
            f"upsertmat demo: --dir {tmp_path / 'file' / 'sub'} cannot be created: Not a",
        ),
    ]:
        assert main(["demo", "--dir", str(directory)]) == 2
        line = _one_line(capsys.readouterr().err)
        assert line.startswith(expected), line


@pytest.mark.parametrize("command", ["run", "demo", "compile-plan", "execute-plan"])
def test_pipeline_commands_offer_only_what_they_accept(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    strategy = text[text.index("--strategy NAME shortcut") :].split("--backend NAME")[0]
    backend = text[text.index("--backend NAME shortcut") :].split("--ttl")[0]
    assert "SORTED" not in strategy and "LEGACY, VALUE, MAP, ADAPTIVE" in strategy
    assert "spark" in backend and not any(name in backend for name in ("heap", "rocksdb", "lmdb"))
    assert "exit codes" in text
    assert text.count("Layers, lowest first") == 1 and "configuration layers" not in text


def a_config(**parts: Any) -> Any:
    """A good pipeline config, with ``parts`` (``"sink.url"``: a field of a part) replaced."""
    from upsertmat.spark.config import PIPELINE_SETTINGS, PipelineConfig
    from upsertmat.spark.parts import Column, SinkSpec, SourceSpec, SparkOptions

    fields: dict[str, Any] = {
        "source": SourceSpec(Path("in"), SourceFormat.JSONL, (Column("id", "long"),)),
        "sink": SinkSpec("sqlite:///sink.db", "sink"),
        "primary_key": ("id",),
        "checkpoint": Path("ck"),
        "settings": PIPELINE_SETTINGS,
        "spark": SparkOptions(),
    }
    for name, value in parts.items():
        part, _, field = name.partition(".")
        fields[part] = replace(fields[part], **{field: value}) if field else value
    return PipelineConfig(**fields)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"settings.strategy": Strategy.SORTED}, "strategy SORTED does not run on the pipeline"),
        ({"sink.url": "sqlite://two.db"}, "sink.url: unsupported SQLite URL 'sqlite://two.db'"),
        ({"sink.url": "mysql://db"}, "sink.url: unsupported database URL"),
        ({"sink.url": "delta://t"}, "sink.url: unsupported Delta Lake URL 'delta://t'"),
        ({"sink.url": "iceberg:///"}, "sink.url: unsupported Iceberg URL 'iceberg:///'"),
        ({"sink.url": "iceberg+catalog: "}, "names no catalog"),
        ({"source.on_error": "ignore"}, "source.on_error must be one of fail, skip"),
        ({"primary_key": ()}, "primary key (primary_key) needs at least one column"),
        ({"primary_key": ("nope",)}, "key column 'nope' is not one of the row columns ['id']"),
        ({"upsert_key": ("nope",)}, "key column 'nope' is not one of the row columns ['id']"),
        ({"trigger_interval": "soon"}, "trigger_interval: not a duration: 'soon'"),
        (
            {"settings.ttl": TtlSettings(ttl_ms=5, time_domain=TimeDomain.EVENT_TIME)},
            "processing-time state TTL only",
        ),
        ({"conflict": ConflictBehavior.ERROR}, "set source.ts_column"),
        ({"spark.shuffle_partitions": 0}, "spark.shuffle_partitions must be >= 1"),
        ({"spark.key_buckets": 0}, "spark.key_buckets must be >= 1"),
        ({"spark.max_files_per_trigger": 0}, "spark.max_files_per_trigger must be >= 1"),
        ({"spark.state_layout": "tree"}, "spark.state_layout must be one of log, blob"),
        ({"spark.state_inline_bytes": -1}, "spark.state_inline_bytes must be >= 0, got -1"),
    ],
)
def test_a_pipeline_config_is_checked_when_made(overrides: dict[str, Any], message: str) -> None:
    from upsertmat.spark.config import PipelineConfig, PipelineConfigError

    good = a_config()
    with pytest.raises(PipelineConfigError, match=re.escape(message)):
        a_config(**overrides)
    if "sink.url" in overrides:  # and a config read back from JSON
        data = json.loads(good.to_json())
        data["sink"]["url"] = overrides["sink.url"]
        with pytest.raises(PipelineConfigError, match=re.escape(message)):
            PipelineConfig.from_json(json.dumps(data))
    with pytest.raises(PipelineConfigError, match="unknown source format 'xml'"):
        PipelineConfig.from_json(good.to_json().replace('"jsonl"', '"xml"'))


def test_a_jobs_run_holds_the_jobs_own_parts(tmp_path: Path) -> None:
    from upsertmat.jobs.runner import pipeline_config

    job = load_job(EXAMPLE, output_base=tmp_path)
    config = pipeline_config(job, follow="2 seconds", changelog=True, query_name="q")
    assert config.source is job.source and config.sink is job.sink and config.spark is job.spark
    assert config.settings is job.settings and config.checkpoint is job.checkpoint
    assert (config.primary_key, config.upsert_key, config.materialize) == (
        job.primary_key,
        job.upsert_key,
        job.materialize,
    )
    assert (config.available_now, config.trigger_interval, config.changelog, config.query_name) == (
        False,
        "2 seconds",
        True,
        "q",
    )
    assert pipeline_config(job).available_now


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///sink.db",
        "sink.db",
        "postgresql://me@localhost/db",
        "delta:///t",
        "delta:////abs/t",
        "iceberg:///w",
        "iceberg+catalog:prod",
    ],
)
def test_every_kind_of_sink_url_is_accepted_when_made(url: str) -> None:
    assert a_config(**{"sink.url": url}).sink.url == url


@pytest.mark.parametrize(
    ("url", "stored"), [("sqlite:///results.db", True), ("delta:///results", False), ("iceberg:///w", False)]
)
def test_the_summary_says_where_misses_are_explained_only_for_sinks_that_store_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], url: str, stored: bool
) -> None:
    from upsertmat.impls.misses import MissSummary
    from upsertmat.jobs.execute import RunOptions, _summary
    from upsertmat.spark.config import PipelineResult
    from upsertmat.spec import Keys, update_before
    from upsertmat.spec.misses import explain_miss

    job = replace(load_job(EXAMPLE, output_base=tmp_path), sink=replace(load_job(EXAMPLE).sink, url=url))
    misses = MissSummary()
    misses.add(explain_miss(Keys(pk=(0,)), update_before(1, 2, "a"), b"1", []))
    _summary(job, PipelineResult((), 0, 0.0, "q", misses=misses), 0, RunOptions(), "run")
    said = capsys.readouterr().out
    assert "1 retraction(s) matched no stored row" in said
    assert ("each miss is explained in table _upsertmat_misses" in said) is stored
