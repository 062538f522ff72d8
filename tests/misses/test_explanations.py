"""Rule-7 miss explanations in the library: every implementation against the model, planted
causes named, nothing on clean input, outputs unchanged, rollbacks and bounds."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from upsertmat.conformance.generators import Advance, Step, timed_streams, tolerated_streams, valid_streams
from upsertmat.conformance.lifecycle import granularity_of
from upsertmat.impls import Settings, TtlSettings, create_named, implementation_names
from upsertmat.impls.misses import MissRecorder, MissSummary, recorder
from upsertmat.impls.state import HeapBackend
from upsertmat.impls.strategies import MapMaterializer
from upsertmat.spec import (
    Change,
    Granularity,
    Keys,
    Materializer,
    MissCause,
    MissExplaining,
    MissExplanation,
    ModelMaterializer,
    TimeDomain,
    canonical,
    delete,
    explain_miss,
    insert,
    update_after,
    update_before,
)
from upsertmat.spec.misses import from_json

IMPLEMENTATIONS = implementation_names()
ROWS = 2  # upsertmat.misses.max-rows in the differential test: long enough keys are truncated


@pytest.fixture(autouse=True)
def _quiet_rule7_warnings() -> Iterator[None]:
    logger = logging.getLogger("upsertmat")
    level = logger.level
    logger.setLevel(logging.ERROR)
    yield
    logger.setLevel(level)


class ExplainingModel(ModelMaterializer):
    """The model, remembering which keys lost rows to TTL expiry (what a miss's cause needs)."""

    def __init__(self, keys: Keys, ttl: TtlSettings, granularity: Granularity) -> None:
        super().__init__(keys, ttl, granularity)
        self.expired_keys: set[bytes] = set()

    def _expire(self) -> None:
        before = {context: len(elements) for context, elements in self._histories.items()}
        super()._expire()
        self.expired_keys |= {c for c, n in before.items() if len(self._histories.get(c, ())) < n}

    def explain(self, change: Change, rows: int) -> MissExplanation | None:
        """Process ``change``; the reference explanation if it missed (from the rows before)."""
        context = self.keys.context_key(change.row)
        self._expire()
        history = [row for row, _ in self._histories.get(context, ())]
        misses = self.retract_misses
        self.process(change)
        if self.retract_misses == misses:
            return None
        expired = 1 if context in self.expired_keys else 0
        return explain_miss(
            self.keys, change, context, history[-rows:], truncated=len(history) > rows, expired=expired
        )


def comparable(explanation: MissExplanation) -> tuple[object, ...]:
    """What must agree exactly (the expiry count only as "some" or "none": how many removals an
    implementation sees depends on its layout and sweep)."""
    return (
        explanation.change.exact(),
        explanation.context,
        explanation.cause,
        explanation.rows_read,
        explanation.truncated,
        [
            (
                canonical(c.row),
                c.from_last,
                [(d.column, canonical([d.stored]), canonical([d.retracted])) for d in c.diffs],
            )
            for c in explanation.candidates
        ],
    )


def replay_both(name: str, keys: Keys, steps: Sequence[Step], ttl: TtlSettings) -> None:
    """Feed ``steps`` to the implementation and the model; explanations must agree input by input."""
    impl = create_named(name, keys, Settings(ttl=ttl, miss_rows=ROWS))
    model = ExplainingModel(keys, ttl, granularity_of(name) if ttl.enabled else Granularity.PER_ELEMENT)
    try:
        assert isinstance(impl, MissExplaining)
        for index, step in enumerate(steps):
            if isinstance(step, Advance):
                impl.advance_time(step.time)
                model.advance_time(step.time)
                continue
            expected = model.explain(step, ROWS)
            impl.process(step)
            actual = impl.take_misses()
            assert [comparable(e) for e in actual] == ([] if expected is None else [comparable(expected)]), (
                f"input {index} {step!r}"
            )
            if expected is not None:
                assert (actual[0].expired > 0) == (
                    expected.expired > 0
                ) or expected.cause is MissCause.DIFFERS
    finally:
        impl.close()


CONFIGS = {
    "no-ttl": TtlSettings(),
    "processing-time": TtlSettings(ttl_ms=5),
    "event-time": TtlSettings(ttl_ms=5, time_domain=TimeDomain.EVENT_TIME),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_every_implementation_explains_misses_as_the_model_does(name: str, config: str) -> None:
    ttl = CONFIGS[config]
    streams = st.one_of(valid_streams(), tolerated_streams())

    @settings(max_examples=max(3, settings().max_examples // 5))
    @given(timed_streams(streams))
    def check(stream: object) -> None:
        assert hasattr(stream, "steps")
        steps = stream.steps
        if not ttl.enabled:  # no clock, no timestamps
            steps = tuple(Change(s.kind, s.row) for s in steps if isinstance(s, Change))
        replay_both(name, stream.keys, steps, ttl)  # type: ignore[attr-defined]

    check()


# -- the planted causes of the issue: columns named, causes told apart --------------------------------

KEYS = Keys(pk=(0,))  # (id, name, uuid, ts, amount): no upsert key, whole rows compared
UUIDS = [f"{n:08x}-7d3c-4b1e-9f2a-{n * 7919:012x}" for n in range(1, 41)]
T0 = 1_700_000_000_000


def nondeterministic_stream() -> list[Change]:
    """Per key: an insert, then an update whose -U recomputed the uuid and the timestamp."""
    changes = []
    for key in range(1, 11):
        uuid, later_uuid, ts = UUIDS[2 * key], UUIDS[2 * key + 1], T0 + 10 * key
        changes += [
            insert(key, "alice", uuid, ts, 10.5),
            update_before(key, "alice", later_uuid, ts + 3, 10.5),  # a miss: uuid and ts differ
            update_after(key, "bob", uuid, ts, 12.0),
        ]
    return changes


def float_stream() -> list[Change]:
    """Per key: a sum computed twice, differing in the last digits."""
    changes = []
    for key in range(1, 6):
        changes += [insert(key, "x", UUIDS[key], T0, 0.1 + 0.2), delete(key, "x", UUIDS[key], T0, 0.3)]
    return changes


def run(
    name: str, changes: Sequence[Change | int], settings_: Settings
) -> tuple[list[Change | None], Materializer]:
    """Outputs of ``changes`` (an int is a clock advance) and the open implementation."""
    impl = create_named(name, KEYS, settings_)
    outputs: list[Change | None] = []
    for item in changes:
        if isinstance(item, int):
            impl.advance_time(item)
        else:
            outputs.append(impl.process(item))
    return outputs, impl


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_planted_non_deterministic_columns_are_named(name: str) -> None:
    outputs, impl = run(name, nondeterministic_stream(), Settings())
    try:
        assert isinstance(impl, MissExplaining)
        explained = impl.take_misses()
        assert len(explained) == impl.retract_misses == 10
        assert {e.cause for e in explained} == {MissCause.DIFFERS}
        assert all([d.column for d in e.candidates[0].diffs] == [2, 3] for e in explained)
        summary = impl.miss_summary  # type: ignore[attr-defined]
        columns = {stats.column: stats for stats in summary.columns.values()}
        assert set(columns) == {2, 3} and columns[2].differed == columns[3].differed == 10
        assert "non-deterministic column" in columns[2].hint()
        assert "NOW(), PROCTIME()" in columns[3].hint()  # a time, always later in the retraction
        lines = summary.lines(["id", "name", "uuid", "ts", "amount"])
        assert lines[0] == "10 retraction(s) matched no stored row (rule 7):"
        assert any(line.startswith("  column 2 (uuid) differed in 10 of those 10:") for line in lines)
        assert any(line.startswith("  column 3 (ts) differed in 10 of those 10:") for line in lines)
    finally:
        impl.close()
    quiet, impl = run(name, nondeterministic_stream(), Settings(miss_rows=0))
    impl.close()
    assert [c if c is None else c.exact() for c in outputs] == [c if c is None else c.exact() for c in quiet]


@pytest.mark.parametrize("name", ["LEGACY/heap", "MAP/rocksdb", "SORTED/lmdb", "ADAPTIVE/heap"])
def test_a_float_computed_twice_and_a_type_change_are_told(name: str) -> None:
    _, impl = run(
        name, [*float_stream(), insert(9, "x", "u", T0, 1), delete(9, "x", "u", T0, 1.0)], Settings()
    )
    try:
        summary = impl.miss_summary  # type: ignore[attr-defined]
        stats = summary.columns[4]
        assert (stats.differed, stats.float_close, stats.type_only) == (6, 5, 1)
        float_only = MissSummary()
        float_only.extend(e for e in impl.take_misses() if isinstance(e.candidates[0].row[4], float))  # type: ignore[attr-defined]
        assert "floats equal to 9 significant digits" in float_only.columns[4].hint()
    finally:
        impl.close()
    _, impl = run(name, [insert(9, "x", "u", T0, 1), delete(9, "x", "u", T0, 1.0)] * 2, Settings())
    try:
        assert "another JSON type" in impl.miss_summary.columns[4].hint()  # type: ignore[attr-defined]
    finally:
        impl.close()


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_missing_add_and_a_ttl_expiry_are_told_apart(name: str) -> None:
    ttl = Settings(ttl=TtlSettings(ttl_ms=10))
    stream: list[Change | int] = [
        insert(1, "a", "u", T0, 1.0),
        insert(2, "b", "u", T0, 1.0),
        delete(2, "b", "u", T0, 1.0),  # key 2 emptied by its retraction, never by TTL
        20,  # key 1's row expires
        delete(1, "a", "u", T0, 1.0),  # expired
        delete(2, "b", "u", T0, 1.0),  # retracted twice: the key is empty, nothing expired
        delete(3, "c", "u", T0, 1.0),  # never added
    ]
    _, impl = run(name, stream, ttl)
    try:
        causes = [e.cause for e in impl.take_misses()]  # type: ignore[attr-defined]
        assert causes == [MissCause.EXPIRED, MissCause.NEVER_ADDED, MissCause.NEVER_ADDED]
        lines = impl.miss_summary.lines()  # type: ignore[attr-defined]
        assert "  1 found their sink key empty because its rows expired by TTL" in lines
    finally:
        impl.close()


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_clean_stream_reports_nothing(name: str) -> None:
    clean = [c for c in nondeterministic_stream() if c.kind.value != "-U"]
    clean += [update_before(*c.row) for c in clean if c.kind.value == "+U"]
    _, impl = run(name, clean, Settings())
    try:
        assert impl.retract_misses == 0
        assert impl.take_misses() == []  # type: ignore[attr-defined]
        assert impl.miss_summary.lines() == []  # type: ignore[attr-defined]
    finally:
        impl.close()


# -- bounds, rollback, API ----------------------------------------------------------------------------


def test_take_misses_hands_each_explanation_out_once_and_off_means_none() -> None:
    impl = create_named("MAP/heap", KEYS)
    impl.process(delete(1, "x"))
    impl.process(delete(2, "y"))
    assert isinstance(impl, MissExplaining)
    assert [e.change.row for e in impl.take_misses()] == [(1, "x"), (2, "y")]
    assert impl.take_misses() == []
    assert impl.miss_summary.misses == 2  # type: ignore[attr-defined]
    off = create_named("MAP/heap", KEYS, Settings(miss_rows=0))
    off.process(delete(1, "x"))
    assert off.retract_misses == 1 and off.take_misses() == []  # type: ignore[attr-defined]
    assert off.miss_summary.misses == 0  # type: ignore[attr-defined]


class FailingCommit(HeapBackend):
    """A heap backend whose next commit raises (a storage failure after the input's writes)."""

    fail_next = False

    def commit(self) -> None:
        if self.fail_next:
            self.fail_next = False
            raise OSError("disk gone")
        super().commit()


def test_a_rolled_back_miss_leaves_no_explanation() -> None:
    backend = FailingCommit()
    impl = MapMaterializer(KEYS, backend)
    impl.process(insert(1, "a"))
    impl.process(delete(1, "b"))  # explained
    backend.fail_next = True
    with pytest.raises(OSError):
        impl.process(delete(1, "c"))  # missed, then its commit failed: it never happened
    assert impl.retract_misses == 1
    assert [e.change.row for e in impl.take_misses()] == [(1, "b")]
    assert impl.miss_summary.misses == 1


def test_a_miss_reads_only_the_newest_rows_of_its_key() -> None:
    impl = create_named("MAP/heap", KEYS, Settings(miss_rows=3))
    for n in range(10):
        impl.process(insert(1, n))
    impl.process(delete(1, 100))
    (explanation,) = impl.take_misses()  # type: ignore[attr-defined]
    assert (explanation.rows_read, explanation.truncated) == (3, True)
    assert [c.row for c in explanation.candidates] == [(1, 9), (1, 8), (1, 7)]
    assert [c.from_last for c in explanation.candidates] == [0, 1, 2]


def test_candidates_rank_by_upsert_key_columns_then_differing_columns() -> None:
    keys = Keys(pk=(0,), upsert_key=(1, 2))
    rows = [(1, "b", "y", 5, 5), (1, "a", "x", 0, 0), (1, "b", "z", 5, 5)]
    explanation = explain_miss(keys, delete(1, "a", "z", 5, 5), keys.context_key((1,)), rows)
    # (1, b, y) differs in the fewest columns but in both upsert-key columns: it comes last
    assert [c.row for c in explanation.candidates] == [rows[2], rows[1], rows[0]]
    assert [(c.key_diffs, len(c.diffs), c.from_last) for c in explanation.candidates] == [
        (1, 1, 0),
        (1, 3, 1),
        (2, 2, 2),
    ]


def test_the_recorder_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(recorder, "MAX_PENDING", 4)
    monkeypatch.setattr(recorder, "MAX_EXPIRED_KEYS", 2)
    kept = MissRecorder(5)
    keys = Keys(pk=(0,))
    for n in range(9):
        kept.record(explain_miss(keys, delete(n, "x"), keys.context_key((n,)), []))
    taken = kept.take()
    assert len(taken) <= 4 and taken[-1].change.row == (8, "x")  # the newest kept
    assert kept.summary.misses == 9  # every one counted
    for context in (b"[1]", b"[2]", b"[3]"):
        kept.note_expired(context)
    assert (kept.expired(b"[1]"), kept.expired(b"[2]"), kept.expired(b"[3]")) == (0, 1, 1)


def test_describe_and_to_json_say_the_same() -> None:
    keys = Keys(pk=(0,))
    explanation = explain_miss(keys, delete(1, "b", 2), keys.context_key((1,)), [(1, "a", 2), (1, "b", 3)])
    assert explanation.describe() == (
        '-D [1, "b", 2] matched no stored row: closest in sink key [1] is its last stored row (2 rows read), '
        "differing in column 2: 3 stored, 2 retracted"
    )
    data = explanation.to_json()
    assert data["cause"] == "differs" and data["key"] == [1]
    assert data["candidates"][0] == {
        "row": [1, "b", 3],
        "from_last": 0,
        "key_diffs": 0,
        "diffs": [{"column": 2, "stored": 3, "retracted": 2}],
    }
    assert from_json(json.loads(json.dumps(data))) == explanation


def test_explanations_are_off_by_setting_and_configurable() -> None:
    from upsertmat.impls import build_settings

    assert build_settings([("test", {"upsertmat.misses.max-rows": "0"})]).miss_rows == 0
    assert build_settings([("test", {"upsertmat.misses.max-rows": 50})]).miss_rows == 50
    assert Settings().miss_rows == 20
    with pytest.raises(ValueError, match=r"upsertmat\.misses\.max-rows"):
        build_settings([("test", {"upsertmat.misses.max-rows": "-1"})])
    assert replace(Settings(), miss_rows=1).miss_rows == 1
