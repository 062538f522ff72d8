"""The strategies on Spark's state store give exactly the model's outputs.

Each test runs one streaming query (3 micro-batches, files written in reverse arrival order)
through the real ``MaterializerProcessor`` on the session's RocksDB state store.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from upsertmat.conformance.generators import GeneratedStream, any_streams
from upsertmat.conformance.scenarios import SCENARIOS
from upsertmat.impls.settings import Settings, Strategy
from upsertmat.spec import Change, Keys, ModelMaterializer

from .harness import run_streams

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SETTINGS = {
    "VALUE": Settings(strategy=Strategy.VALUE),
    "MAP": Settings(strategy=Strategy.MAP),
    "ADAPTIVE": Settings(strategy=Strategy.ADAPTIVE, threshold_high=4, threshold_low=2),
    "LEGACY": Settings(strategy=Strategy.LEGACY),
}
KEY_SETS = sorted({scenario.keys for scenario in SCENARIOS}, key=repr)


def model_outputs(keys: Keys, stream: tuple[Change, ...]) -> list[tuple[int, Change]]:
    model = ModelMaterializer(keys)
    outputs = [(index, model.process(change)) for index, change in enumerate(stream)]
    return [(index, change) for index, change in outputs if change is not None]


@pytest.mark.parametrize("name", list(SETTINGS))
def test_scenario_catalogue(spark: SparkSession, tmp_path: Path, name: str) -> None:
    for number, keys in enumerate(KEY_SETS):
        scenarios = [scenario for scenario in SCENARIOS if scenario.keys == keys]
        got = run_streams(
            spark, tmp_path / str(number), keys, SETTINGS[name], [scenario.inputs for scenario in scenarios]
        )
        for scenario, outputs in zip(scenarios, got, strict=True):
            expected = [
                (index, change) for index, change in enumerate(scenario.expected) if change is not None
            ]
            assert outputs == expected, scenario.name


@pytest.mark.parametrize("upsert_key", [False, True])
@pytest.mark.parametrize("name", list(SETTINGS))
@settings(
    max_examples=1,
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: each example is a query
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_generated_streams_match_the_model(
    spark: SparkSession,
    tmp_path_factory: pytest.TempPathFactory,
    name: str,
    upsert_key: bool,
    data: st.DataObject,
) -> None:
    streams: list[GeneratedStream] = data.draw(st.lists(any_streams(upsert_key), min_size=15, max_size=15))
    keys = streams[0].keys
    assert all(stream.keys == keys for stream in streams)
    got = run_streams(
        spark,
        tmp_path_factory.mktemp("generated"),
        keys,
        replace(SETTINGS[name]),
        [s.arrival for s in streams],
    )
    for stream, outputs in zip(streams, got, strict=True):
        assert outputs == model_outputs(keys, stream.arrival), stream


def test_the_state_schemas_given_as_structs_equal_the_ddl_the_checkpoints_pinned(spark: SparkSession) -> None:
    # Checkpoints written when the adapter passed DDL strings must find the same state schemas.
    from upsertmat.impls.state.spark import KEY_SCHEMA, VALUE_SCHEMA
    from upsertmat.spark.processor import KEY_STRUCT, VALUE_STRUCT

    assert spark.createDataFrame([], KEY_SCHEMA).schema == KEY_STRUCT
    assert spark.createDataFrame([], VALUE_SCHEMA).schema == VALUE_STRUCT
    assert spark.createDataFrame([], VALUE_SCHEMA).schema.json() == VALUE_STRUCT.json()
