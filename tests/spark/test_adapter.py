"""The spark state adapter without a JVM: pyspark's own in-memory harness (TwsTester) drives the
real processor, so round trips and layouts can be counted exactly."""

from __future__ import annotations

import json

from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.tws_tester import TwsTester

from upsertmat.impls.settings import Settings, Strategy
from upsertmat.impls.state.spark import SparkBackend, map_key, split_map_key
from upsertmat.spark.processor import MaterializerProcessor, ProcessorSpec
from upsertmat.spec import (
    Change,
    Keys,
    ModelMaterializer,
    RowKind,
    delete,
    insert,
    update_after,
    update_before,
)

KEYS = Keys(pk=(0,))


def rows_of(changes: list[Change], start: int = 0) -> list[SparkRow]:
    return [
        SparkRow(arrival=start + i, op=c.kind.value, row=json.dumps(list(c.row)))
        for i, c in enumerate(changes)
    ]


def run(strategy: Strategy, batches: list[list[Change]]) -> tuple[list[list[tuple[int, Change]]], list[int]]:
    """Outputs and the processor's cumulative JVM round trips after each batch (one key 'k')."""
    processor = MaterializerProcessor(
        ProcessorSpec(keys=KEYS, settings=Settings(strategy=strategy), row_json="row", arrival="arrival")
    )
    tester = TwsTester(processor)
    outputs, trips, start = [], [], 0
    for batch in batches:
        emitted = tester.test(("k",), list(reversed(rows_of(batch, start))))
        outputs.append([(r.arrival, Change(RowKind.parse(r.op), tuple(json.loads(r.row)))) for r in emitted])
        backend = processor._backend
        assert isinstance(backend, SparkBackend)
        trips.append(backend.round_trips)
        start += len(batch)
    return outputs, trips


BATCHES = [
    [insert(1, 10, "a"), insert(1, 20, "b"), update_before(1, 10, "a"), update_after(1, 11, "a2")],
    [delete(1, 20, "b"), insert(1, 30, "c"), delete(1, 30, "c"), delete(1, 11, "a2"), insert(1, 40, "d")],
]


def test_value_makes_one_read_and_one_write_per_key_per_batch_and_matches_the_model() -> None:
    outputs, trips = run(Strategy.VALUE, BATCHES)
    assert trips == [2, 4]  # however many events the key has in the batch
    model = ModelMaterializer(KEYS)
    flat = [change for batch in BATCHES for change in batch]
    expected = [(i, out) for i, change in enumerate(flat) if (out := model.process(change)) is not None]
    assert [item for batch in outputs for item in batch] == expected


def test_map_and_legacy_match_the_model_across_batches() -> None:
    flat = [change for batch in BATCHES for change in batch]
    model = ModelMaterializer(KEYS)
    expected = [(i, out) for i, change in enumerate(flat) if (out := model.process(change)) is not None]
    for strategy in (Strategy.MAP, Strategy.LEGACY, Strategy.ADAPTIVE):
        outputs, _ = run(strategy, BATCHES)
        assert [item for batch in outputs for item in batch] == expected, strategy


def test_map_keys_keep_contexts_apart() -> None:
    assert map_key(b"a", b"bc") != map_key(b"ab", b"c")
    assert split_map_key(map_key(b"ctx", b"\x00\x01")) == (b"ctx", b"\x00\x01")
