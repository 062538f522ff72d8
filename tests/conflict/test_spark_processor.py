"""The Spark ConflictProcessor under pyspark's TwsTester (event time, no JVM) agrees with the catalogue.

Each scenario's changes between two watermarks form a micro-batch (rows grouped by sink key, or
all in one key bucket with blob state); a watermark line is ``setWatermark``, which fires the
timers; the end of the input is one more watermark. Spark fires the timers of different
grouping keys in no defined order, so per-key runs are compared per watermark sorted by context
key; a bucket (one grouping key) must emit in context-key order itself.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.tws_tester import TwsTester

from upsertmat.conformance.conflict.scenarios import CONFLICT_SCENARIOS, ConflictScenario
from upsertmat.impls.settings import Backend, Settings
from upsertmat.spark.conflict import CONFLICT_OP, ConflictProcessor
from upsertmat.spark.processor import ProcessorSpec
from upsertmat.spec import Change, ConflictBehavior, ConflictError, RowKind, insert

BEHAVIORS = [ConflictBehavior.NOTHING, ConflictBehavior.ERROR]
END = 10**9


def make_tester(
    scenario: ConflictScenario, behavior: ConflictBehavior, bucket: bool, skip: bool = False
) -> TwsTester:
    spec = ProcessorSpec(
        keys=scenario.keys,
        settings=Settings(backend=Backend.SPARK),
        row_json="row",
        op="op",
        arrival="seq",
        ts="ts",
        blob_state=bucket,
    )
    processor = ConflictProcessor(spec, behavior, skip_conflicts=skip)
    return TwsTester(processor, timeMode="EventTime", eventTimeExtractor=lambda row: row.ts)


def run(
    scenario: ConflictScenario, behavior: ConflictBehavior, bucket: bool, skip: bool = False
) -> tuple[list[tuple[int, Change]], int | None, list[str]]:
    """(emissions as (line index, change), failing line index, conflict messages)."""
    tester = make_tester(scenario, behavior, bucket, skip)
    watermark = 0
    batch: dict[Any, list[SparkRow]] = defaultdict(list)
    emitted: list[tuple[int, Change]] = []
    conflicts: list[str] = []
    for index, line in enumerate([*scenario.lines, END]):
        if isinstance(line, Change):
            row = SparkRow(seq=index, op=line.kind.value, row=json.dumps(list(line.row)), ts=watermark + 1)
            batch["bucket" if bucket else json.dumps(line.row[0])].append(row)
            continue
        if line <= watermark:
            continue
        for key, rows in batch.items():
            assert tester.test(key, rows) == [], "nothing may be emitted before a watermark"
        batch.clear()
        try:
            fired = tester.setWatermark(line)
        except ConflictError:
            return emitted, index, conflicts
        watermark = line
        assert isinstance(fired, list)
        conflicts += [row.row for row in fired if row.op == CONFLICT_OP]
        changes = [
            Change(RowKind(row.op), tuple(json.loads(row.row))) for row in fired if row.op != CONFLICT_OP
        ]
        if not bucket:
            changes.sort(key=lambda change: scenario.keys.context_key(change.row))
        emitted += [(index, change) for change in changes]
    return emitted, None, conflicts


@pytest.mark.parametrize("bucket", [False, True], ids=["per-key", "bucket"])
@pytest.mark.parametrize("behavior", BEHAVIORS, ids=[behavior.value for behavior in BEHAVIORS])
@pytest.mark.parametrize(
    "scenario", CONFLICT_SCENARIOS, ids=[scenario.name for scenario in CONFLICT_SCENARIOS]
)
def test_the_processor_matches_the_catalogue(
    scenario: ConflictScenario, behavior: ConflictBehavior, bucket: bool
) -> None:
    expected, error_at = scenario.expected(behavior)
    emitted, failed_at, _ = run(scenario, behavior, bucket)
    assert (emitted, failed_at) == (list(expected), error_at)


def test_skipped_conflicts_are_reported_as_rows_and_keep_the_current_row() -> None:
    scenario = next(
        s for s in CONFLICT_SCENARIOS if s.name == "NOTHING keeps the current row and forgets the second"
    )
    emitted, failed_at, conflicts = run(scenario, ConflictBehavior.ERROR, bucket=True, skip=True)
    assert failed_at is None
    assert emitted == [(1, insert(1, 10, "a"))]
    (message,) = conflicts
    assert message.startswith("Primary key constraint violation: sink key [1] has 2 live rows")


def test_a_late_row_is_dropped_before_the_processor() -> None:
    scenario = CONFLICT_SCENARIOS[0]
    tester = make_tester(scenario, ConflictBehavior.NOTHING, bucket=False)
    tester.setWatermark(5)
    late = SparkRow(seq=0, op="+I", row=json.dumps([1, 10, "a"]), ts=5)
    assert tester.test("1", [late]) == []
    assert tester.setWatermark(6) == []  # nothing was buffered: no timer, no output
