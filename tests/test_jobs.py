"""Job files: loading, layered configuration, errors (no Spark needed)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from upsertmat.cli import build_parser, main
from upsertmat.commands.run import job_from_args
from upsertmat.impls.settings import Backend, Strategy
from upsertmat.jobs.loader import JobError, load_job, with_overrides
from upsertmat.jobs.model import INTERNAL_URL, SourceFormat

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "jobs" / "users-levels.yaml"

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
    assert job.sink.is_postgresql and job.sink.table == "other"
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
