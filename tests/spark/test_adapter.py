"""The spark state adapter without a JVM: pyspark's own in-memory harness (TwsTester) drives the
real processor, so round trips and layouts can be counted exactly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.tws_tester import TwsTester

from upsertmat.impls.settings import Settings, Strategy
from upsertmat.impls.state.spark import SparkBackend, map_key, split_map_key
from upsertmat.sinks import last_per_key
from upsertmat.spark.processor import MaterializerProcessor, ProcessorSpec
from upsertmat.spec import (
    Change,
    Granularity,
    Keys,
    ModelMaterializer,
    RowKind,
    TtlSettings,
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


def run(
    strategy: Strategy,
    batches: list[list[Change]],
    bulk_read_rows: int | None = None,
    last_per_key: bool = False,
    blob: bool = False,
) -> tuple[list[list[tuple[int, Change]]], list[int]]:
    """Outputs and the processor's cumulative JVM round trips after each batch (one grouping
    key 'k', as a key bucket holding every sink key)."""
    processor = MaterializerProcessor(
        ProcessorSpec(
            keys=KEYS,
            settings=Settings(strategy=strategy),
            row_json="row",
            arrival="arrival",
            bulk_read_rows=bulk_read_rows,
            last_per_key=last_per_key,
            blob_state=blob,
        )
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


@pytest.mark.parametrize(
    ("strategy", "granularity", "last"),
    [
        (Strategy.LEGACY, Granularity.PER_KEY, update_after(1, "a")),
        (Strategy.VALUE, Granularity.PER_ELEMENT, delete(1, "b")),
        (Strategy.MAP, Granularity.PER_ELEMENT, delete(1, "b")),
        (Strategy.ADAPTIVE, Granularity.PER_ELEMENT, delete(1, "b")),
    ],
)
def test_ttl_on_spark_is_applied_per_key_by_legacy_and_per_element_by_the_others(
    strategy: Strategy, granularity: Granularity, last: Change
) -> None:
    """TTL 10 ms, the clock being each micro-batch's processing time: +I a at 1, +I b at 6, -D b
    at 13. LEGACY keeps one stamp per sink key, which b's write re-stamped at 6, so a is still
    there: +U a. The per-element strategies expired a at 11: -D b. Each equals the model of its
    granularity, as on every other backend (docs/ttl.md)."""
    ttl = TtlSettings(ttl_ms=10)
    processor = MaterializerProcessor(
        ProcessorSpec(
            keys=KEYS, settings=Settings(strategy=strategy, ttl=ttl), row_json="row", arrival="arrival"
        )
    )
    tester = TwsTester(processor, timeMode="ProcessingTime")
    model = ModelMaterializer(KEYS, ttl=ttl, granularity=granularity)
    outputs: list[Change] = []
    expected: list[Change] = []
    start = 0
    for now, batch in ((1, [insert(1, "a")]), (6, [insert(1, "b")]), (13, [delete(1, "b")])):
        tester.setProcessingTime(now)
        emitted = tester.test(("k",), rows_of(batch, start))
        outputs.extend(Change(RowKind.parse(r.op), tuple(json.loads(r.row))) for r in emitted)
        model.advance_time(now)
        expected.extend(out for change in batch if (out := model.process(change)) is not None)
        start += len(batch)
    assert outputs == expected
    assert outputs[-1] == last


def test_map_keys_keep_contexts_apart() -> None:
    assert map_key(b"a", b"bc") != map_key(b"ab", b"c")
    assert split_map_key(map_key(b"ctx", b"\x00\x01")) == (b"ctx", b"\x00\x01")


# A bucket holding three sink keys: batch 1 writes all three, batch 2 touches two of them.
BUCKET_BATCHES = [
    [insert(1, 10, "a"), insert(2, 20, "b"), insert(3, 30, "c"), update_before(1, 10, "a")],
    [update_after(1, 11, "a2"), delete(2, 20, "b"), insert(2, 21, "b2"), insert(1, 12, "a3")],
]


def test_bulk_reads_load_a_bucket_in_one_call_and_match_the_model() -> None:
    flat = [change for batch in BUCKET_BATCHES for change in batch]
    model = ModelMaterializer(KEYS)
    expected = [(i, out) for i, change in enumerate(flat) if (out := model.process(change)) is not None]
    lazy_outputs, lazy_trips = run(Strategy.VALUE, BUCKET_BATCHES)
    bulk_outputs, bulk_trips = run(Strategy.VALUE, BUCKET_BATCHES, bulk_read_rows=2)
    # Lazy: a read and a write per touched sink key; bulk: one iteration, then the writes.
    assert lazy_trips == [3 + 3, 6 + 2 + 2]
    assert bulk_trips == [1 + 3, 4 + 1 + 2]
    assert [item for batch in lazy_outputs for item in batch] == expected
    assert [item for batch in bulk_outputs for item in batch] == expected
    for strategy in (Strategy.MAP, Strategy.LEGACY, Strategy.ADAPTIVE):
        outputs, _ = run(strategy, BUCKET_BATCHES, bulk_read_rows=2)
        assert [item for batch in outputs for item in batch] == expected, strategy


def test_bulk_reads_wait_for_enough_rows() -> None:
    _, trips = run(Strategy.VALUE, BUCKET_BATCHES, bulk_read_rows=5)
    assert trips == [3 + 3, 6 + 2 + 2]  # 4 rows per batch < 5: lazy reads


def test_last_per_key_emits_what_the_sink_keeps_of_each_batch() -> None:
    full, _ = run(Strategy.VALUE, BUCKET_BATCHES)
    reduced, _ = run(Strategy.VALUE, BUCKET_BATCHES, bulk_read_rows=2, last_per_key=True)
    for whole, last in zip(full, reduced, strict=True):
        kept = {arrival: change for arrival, change in whole}
        expected = {}
        for arrival, change in whole:
            expected[change.row[0]] = (arrival, change)
        assert sorted(last, key=lambda item: item[0]) == sorted(expected.values(), key=lambda item: item[0])
        assert all(kept[arrival] == change for arrival, change in last)

        def applied(items: list[tuple[int, Change]]) -> tuple[list[str], list[str]]:
            """The sink's statements for the batch, as sorted JSON texts (order-free)."""
            ordered = sorted(items, key=lambda item: item[0])
            upserts, deletes = last_per_key([(change.kind.value, change.row) for _, change in ordered], (0,))
            return sorted(json.dumps(row) for row in upserts), sorted(json.dumps(key) for key in deletes)

        assert applied(last) == applied(whole)


def test_blob_state_costs_two_calls_per_grouping_key_and_batch_and_matches_the_model() -> None:
    flat = [change for batch in BUCKET_BATCHES for change in batch]
    model = ModelMaterializer(KEYS)
    expected = [(i, out) for i, change in enumerate(flat) if (out := model.process(change)) is not None]
    outputs, trips = run(Strategy.VALUE, BUCKET_BATCHES, blob=True)
    assert trips == [2, 4]  # one blob read and one blob write per batch, however many sink keys
    assert [item for batch in outputs for item in batch] == expected
    for strategy in (Strategy.MAP, Strategy.LEGACY, Strategy.ADAPTIVE):
        outputs, _ = run(strategy, BUCKET_BATCHES, blob=True)
        assert [item for batch in outputs for item in batch] == expected, strategy
    # every key deleted: the blob is cleared, and the next batch starts from nothing
    gone = [
        [insert(1, 10, "a"), insert(2, 20, "b")],
        [delete(1, 10, "a"), delete(2, 20, "b")],
        [insert(1, 11, "c")],
    ]
    outputs, _ = run(Strategy.VALUE, gone, blob=True)
    assert [[change for _, change in batch] for batch in outputs] == [
        [insert(1, 10, "a"), insert(2, 20, "b")],
        [delete(1, 10, "a"), delete(2, 20, "b")],
        [insert(1, 11, "c")],
    ]


def test_batched_output_is_one_row_per_key_and_batch_holding_the_last_per_key_changes() -> None:
    import pyarrow as pa  # type: ignore[import-untyped]

    from upsertmat.spark.pipeline import materialized_changes
    from upsertmat.spark.processor import BATCH_OP

    reduced, _ = run(Strategy.VALUE, BUCKET_BATCHES, last_per_key=True)
    processor = MaterializerProcessor(
        ProcessorSpec(
            keys=KEYS,
            settings=Settings(strategy=Strategy.VALUE),
            row_json="row",
            arrival="arrival",
            last_per_key=True,
            batched_output=True,
        )
    )
    tester, start = TwsTester(processor), 0
    for batch, expected in zip(BUCKET_BATCHES, reduced, strict=True):
        emitted = tester.test(("k",), list(reversed(rows_of(batch, start))))
        start += len(batch)
        assert [row.op for row in emitted] == [BATCH_OP]
        table = pa.table(
            {name: [getattr(row, name) for row in emitted] for name in ("arrival", "op", "changes")}
        )
        decoded = materialized_changes(table)
        assert sorted(decoded) == sorted((at, c.kind.value, c.row) for at, c in expected)
    with pytest.raises(ValueError, match="batched_output needs last_per_key"):
        ProcessorSpec(keys=KEYS, settings=Settings(), row_json="row", batched_output=True)


def test_the_processor_uses_process_many_when_the_materializer_has_it() -> None:
    from upsertmat.spark.processor import run_many

    class Many:
        def __init__(self) -> None:
            self.calls: list[int] = []

        def process(self, change: Change) -> Change | None:
            raise AssertionError("process_many should have been used")

        def process_many(self, changes: list[Change]) -> list[Change | None]:
            self.calls.append(len(changes))
            return list(changes)

    class One:
        def process(self, change: Change) -> Change | None:
            return change

    changes = [insert(1, 10, "a"), delete(1, 10, "a")]
    many = Many()
    assert run_many(many, changes) == changes  # type: ignore[arg-type]
    assert many.calls == [2]
    assert run_many(One(), changes) == changes  # type: ignore[arg-type]


def test_large_blobs_are_compressed_and_plain_blobs_of_earlier_builds_still_read() -> None:
    import msgpack

    from upsertmat.impls.state.spark import COMPRESS_FROM, COMPRESSED, decode_blob, encode_blob

    small = msgpack.packb([b"k", b"v"])
    assert encode_blob(small) == small and decode_blob(small) == small
    big = msgpack.packb([item for i in range(200) for item in (b"[%d]" % i, b"payload-%d" % i)])
    assert len(big) >= COMPRESS_FROM
    stored = encode_blob(big)
    assert stored[:1] == COMPRESSED and len(stored) < len(big)
    assert decode_blob(stored) == big
    assert decode_blob(big) == big  # an uncompressed blob (earlier builds, small blobs) as it is
    with pytest.raises(msgpack.exceptions.FormatError):  # 0xc1 is never msgpack: earlier builds refuse it
        msgpack.unpackb(stored)
    # A bucket whose blob is compressed across batches (200 sink keys) matches the model.
    batches = [
        [insert(key, 0, f"row-{key}") for key in range(200)],
        [
            change
            for key in range(0, 200, 3)
            for change in (update_before(key, 0, f"row-{key}"), update_after(key, 1, "x"))
        ],
        [delete(key, 1, "x") for key in range(0, 200, 6)],
    ]
    flat = [change for batch in batches for change in batch]
    model = ModelMaterializer(KEYS)
    expected = [(i, out) for i, change in enumerate(flat) if (out := model.process(change)) is not None]
    outputs, _ = run(Strategy.VALUE, batches, blob=True)
    assert [item for batch in outputs for item in batch] == expected


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["+I", "+U", "-U", "-D"]),
            st.tuples(st.sampled_from([1, 1.0, True, 2, "a", None, -0.0, 0]), st.integers(0, 3)),
        ),
        max_size=12,
    )
)
def test_last_per_key_of_one_column_groups_as_tuples_do(changes: list[tuple[str, tuple[Any, int]]]) -> None:
    """A one-column key is grouped by its value (no tuple built per change): the same rows and
    keys, in the same order, as grouping by the 1-tuple."""
    final: dict[tuple[Any, ...], tuple[str, Any]] = {}
    for op, row in changes:
        final[(row[0],)] = (op, row)
    expected_upserts = [row for op, row in final.values() if op in ("+I", "+U")]
    expected_deletes = [key for key, (op, _) in final.items() if op in ("-U", "-D")]
    upserts, deletes = last_per_key(changes, (0,))
    assert repr(upserts) == repr(expected_upserts)
    assert repr(deletes) == repr(expected_deletes)
