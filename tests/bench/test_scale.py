"""The scale sweep's workload and its model (no Spark): the files the pipeline reads, and the
digest of the table they must leave, computed from a dict replay of the same records."""

from __future__ import annotations

from pathlib import Path

import pytest

from upsertmat.bench.plans import scale_bench
from upsertmat.bench.scale import (
    BatchCost,
    ScaleBench,
    ScaleFigures,
    ScaleRun,
    model_digest,
    report,
    table_digest,
    workload,
)
from upsertmat.cli import main
from upsertmat.sinks import Column, open_sink


def test_the_workload_loads_every_key_then_updates_random_ones_in_pairs() -> None:
    bench = ScaleBench(batch_changes=100, batches=3, load_batch=40)
    files = list(workload(100, bench))
    assert [len(records) for records in files] == [40, 40, 20, 100, 100, 100]
    loaded = [record for records in files[:3] for record in records]
    assert [record["id"] for record in loaded] == list(range(100)) and {r["op"] for r in loaded} == {"+I"}
    seqs = [record["seq"] for records in files for record in records]
    assert seqs == list(range(len(seqs)))
    for records in files[3:]:
        for before, after in zip(records[::2], records[1::2], strict=True):
            assert (before["op"], after["op"], before["id"]) == ("-U", "+U", after["id"])
            assert after["version"] == before["version"] + 1


def test_the_model_digest_is_the_digest_of_the_table_the_workload_leaves(tmp_path: Path) -> None:
    bench = ScaleBench(batch_changes=60, batches=2, load_batch=25)
    table: dict[int, tuple[int, int, str]] = {}
    for records in workload(50, bench):
        for record in records:
            row = (record["id"], record["version"], record["payload"])
            if record["op"] in ("+I", "+U"):
                table[record["id"]] = row
    url = f"sqlite:///{tmp_path / 'model.db'}"
    sink = open_sink(
        url, "scale", [Column("id", "bigint"), Column("version", "bigint"), Column("payload", "string")], (0,)
    )
    sink.apply_batch("q", 0, [("+I", row) for row in table.values()])
    sink.close()
    assert table_digest(url, "scale") == model_digest(50, bench)
    other = open_sink(
        url, "scale", [Column("id", "bigint"), Column("version", "bigint"), Column("payload", "string")], (0,)
    )
    other.apply_batch("q", 1, [("+U", (0, 999, "changed"))])
    other.close()
    assert table_digest(url, "scale") != model_digest(50, bench)


def test_the_report_gives_the_ratio_to_the_smallest_size_per_sink_and_mode() -> None:
    def run(size: int, seconds: float) -> ScaleRun:
        batch = BatchCost(1, 10, seconds, 3, 100, 200, 0.1, 0.2, 300, 0.3, 0.4)
        return ScaleRun(size, "sqlite", False, 1.0, (batch,), {"driver": 1.0}, True, size, 0, 0)

    text = report(ScaleFigures(ScaleBench(), [run(1_000, 2.0), run(10_000, 3.0)]))
    assert "(1.00x)" in text and "(1.50x)" in text and "= model" in text


def test_the_sweep_records_the_library_versions_it_ran_with() -> None:
    figures = ScaleFigures(ScaleBench(), [], {"pyspark": "4.3.0", "pyarrow": "19.0.1"})
    assert "libraries: pyspark 4.3.0, pyarrow 19.0.1" in report(figures)
    assert figures.as_dict()["libraries"] == {"pyspark": "4.3.0", "pyarrow": "19.0.1"}
    assert set(ScaleFigures(ScaleBench()).libraries) == {"pyspark", "pyarrow", "msgpack", "numpy"}


def test_the_sweep_runs_the_matching_modes_upsert_key_asks_for() -> None:
    def bench(upsert_keys: list[bool] | None) -> ScaleBench:
        return scale_bench(
            sizes=(1_000,), batch_changes=100, batches=1, sinks=("sqlite",), postgres_url=None,
            state_layout="log", state_inline_bytes=0, key_buckets=None, shuffle_partitions=None,
            upsert_keys=upsert_keys,
        )  # fmt: skip

    assert bench(None).keyed == (False, True)
    assert bench([False]).keyed == (False,)
    assert bench([True, False]).keyed == (True, False)


def test_postgresql_runs_beside_the_sinks_asked_for_or_alone_when_named() -> None:
    def sinks(kinds: tuple[str, ...], url: str | None) -> tuple[str, ...]:
        return scale_bench(
            sizes=(1_000,), batch_changes=100, batches=1, sinks=kinds, postgres_url=url,
            state_layout="log", state_inline_bytes=0, key_buckets=None, shuffle_partitions=None,
        ).sinks  # fmt: skip

    url = "postgresql://bench@127.0.0.1:55432/scale"
    assert sinks(("sqlite",), None) == ("sqlite",)
    assert sinks(("sqlite",), url) == ("sqlite", "postgresql")
    assert sinks(("postgresql",), url) == ("postgresql",)
    assert sinks(("postgresql", "paimon"), url) == ("postgresql", "paimon")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--table-sizes", "1000", "--pipeline-sink", "postgresql"],
            "--pipeline-sink postgresql needs --postgres-url",
        ),
        (["--pipeline-sink", "postgresql"], "--pipeline-sink postgresql: only with --table-sizes"),
        (["--pipeline-sink", "mysql"], "expected sink kinds among sqlite"),
    ],
)
def test_a_server_sink_without_its_server_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(["bench", "--pipeline", "--output-dir", str(tmp_path), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before anything ran
