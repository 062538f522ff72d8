"""The log layout of the Spark backend (``LogSparkMap``) without a JVM: pyspark's in-memory harness
(TwsTester) drives the real processor, the machine-local copy is a real LMDB environment under
the test's directory.

What must hold: every strategy's outputs equal the model's, batch by batch, whether the local copy
is warm, lost or stale; a warm batch costs three state calls per state and grouping key and reads
only the head; a task whose state Spark did not commit (its copy moved on anyway) is never read
back from the copy (the retry of the batch rebuilds it from Spark's log); a grouping key written
by the blob layout continues on the log layout; the log is compacted and stays O(live entries).
A small state is kept whole in its head (two calls a batch, no log, no copy), moves to the log
when it outgrows the inline bound and back when a compaction finds it under half of it, and a
retry across either move sees the committed form.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import Row as SparkRow
from pyspark.sql.streaming.tws_tester import TwsTester

from upsertmat.impls.settings import Settings, Strategy
from upsertmat.impls.state.spark import COMPACT_MIN, HEAD_SUFFIX, INLINE_MAX, LOG_SUFFIX, SparkBackend
from upsertmat.impls.state.spark_cache import DIRECTORY_VARIABLE
from upsertmat.spark.misses import MISS_OP
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
GROUP = ("bucket-7",)
STRATEGIES = (Strategy.VALUE, Strategy.MAP, Strategy.LEGACY, Strategy.ADAPTIVE)


@pytest.fixture(autouse=True)
def copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    directory = tmp_path / "local-copies"
    monkeypatch.setenv(DIRECTORY_VARIABLE, str(directory))
    from upsertmat.impls.state import spark_cache

    spark_cache._CACHES.clear()  # each test opens its own environment
    yield directory
    spark_cache._CACHES.clear()


def processor(
    strategy: Strategy, scope: str | None = "query-1", inline_max: int = 0
) -> MaterializerProcessor:
    """The processor under test; ``inline_max`` 0 (the default here) keeps every state in the log
    form, which most tests are about (the layout's own default keeps small states inline)."""
    return MaterializerProcessor(
        ProcessorSpec(
            keys=KEYS,
            settings=Settings(strategy=strategy),
            row_json="row",
            arrival="arrival",
            blob_state=True,
            log_scope=scope,
            log_inline_max=inline_max,
        )
    )


def rows_of(changes: list[Change], start: int) -> list[SparkRow]:
    return [
        SparkRow(arrival=start + i, op=c.kind.value, row=json.dumps(list(c.row)))
        for i, c in enumerate(changes)
    ]


def feed(tester: TwsTester, batch: list[Change], start: int) -> list[tuple[int, Change]]:
    emitted = tester.test(GROUP, list(reversed(rows_of(batch, start))))
    changes = [r for r in emitted if r.op != MISS_OP]  # the explanations of misses aside
    return sorted((r.arrival, Change(RowKind.parse(r.op), tuple(json.loads(r.row)))) for r in changes)


def expected_outputs(batches: list[list[Change]]) -> list[list[tuple[int, Change]]]:
    model, start, found = ModelMaterializer(KEYS), 0, []
    for batch in batches:
        outs = []
        for index, change in enumerate(batch):
            out = model.process(change)
            if out is not None:
                outs.append((start + index, out))
        found.append(outs)
        start += len(batch)
    return found


def state_of(tester: TwsTester, name: str) -> tuple[Any, list[Any]]:
    """(head, log) of state ``name`` of the test's grouping key, as Spark holds them."""
    return tester.peekValueState(name + HEAD_SUFFIX, GROUP), tester.peekListState(name + LOG_SUFFIX, GROUP)


def backend_of(tester_processor: MaterializerProcessor) -> SparkBackend:
    backend = tester_processor._backend
    assert isinstance(backend, SparkBackend)
    return backend


BATCHES = [
    [insert(key, 0, f"row-{key}") for key in range(40)] + [insert(3, 1, "dup")],
    [
        change
        for key in range(0, 40, 3)
        for change in (update_before(key, 0, f"row-{key}"), update_after(key, 1, "x"))
    ],
    [delete(key, 1, "x") for key in range(0, 40, 6)] + [update_before(3, 1, "dup"), insert(99, 9, "new")],
    [insert(key, 2, "back") for key in range(0, 40, 6)],
]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_on_the_log_layout_equals_the_model_batch_by_batch(strategy: Strategy) -> None:
    tested = processor(strategy)
    tester = TwsTester(tested)
    start = 0
    for batch, expected in zip(BATCHES, expected_outputs(BATCHES), strict=True):
        assert feed(tester, batch, start) == expected
        start += len(batch)
    assert backend_of(tested).rebuilds == 0  # the copy was warm from the first write on


def test_a_warm_batch_reads_the_head_only_and_makes_three_calls_per_state() -> None:
    tested = processor(Strategy.VALUE)
    tester = TwsTester(tested)
    feed(tester, BATCHES[0], 0)
    backend = backend_of(tested)
    before = backend.traffic()
    feed(tester, BATCHES[1], len(BATCHES[0]))
    calls, read, written, _ = (now - then for now, then in zip(backend.traffic(), before, strict=True))
    states = len(backend._stores)
    assert calls == 3 * states  # head read, appendList, head write
    assert read < 60 * states  # the heads: [token, logged, live], nothing of the entries
    log = tester.peekListState(next(iter(backend._stores)) + LOG_SUFFIX, GROUP)
    assert len(log) == 2  # the first write, then this batch's changed entries appended
    assert 0 < written < 40 * 64  # what changed, not the bucket


def test_a_warm_batch_looks_each_key_up_in_the_copy_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flush knows which keys the batch read were stored (a second lookup per changed key
    would double the copy's reads at table scale); a key written without being read is looked up
    once, by the flush."""
    from upsertmat.impls.state import spark_cache

    looked_up: list[bytes] = []
    real_get = spark_cache.LocalStateCache.get

    def counting_get(self: Any, transaction: Any, space: bytes, key: bytes) -> bytes | None:
        looked_up.append(space + key)
        return real_get(self, transaction, space, key)

    tested = processor(Strategy.VALUE)
    tester = TwsTester(tested)
    expected = expected_outputs(BATCHES[:2])
    assert feed(tester, BATCHES[0], 0) == expected[0]
    monkeypatch.setattr(spark_cache.LocalStateCache, "get", counting_get)
    assert feed(tester, BATCHES[1], len(BATCHES[0])) == expected[1]
    assert looked_up  # the batch was warm: it read its entries from the copy
    assert len(looked_up) == len(set(looked_up))


def test_a_task_on_a_machine_without_the_copy_rebuilds_it_from_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batch 0 on one machine, the rest on another (its own, empty local copies): the second
    reads each state's log from Spark once, then runs warm."""
    from upsertmat.impls.state import spark_cache

    first = processor(Strategy.MAP)
    first_tester = TwsTester(first)
    expected = expected_outputs(BATCHES)
    assert feed(first_tester, BATCHES[0], 0) == expected[0]
    monkeypatch.setenv(DIRECTORY_VARIABLE, str(tmp_path / "another-machine"))
    spark_cache._CACHES.clear()
    second = processor(Strategy.MAP)
    tester = TwsTester(second)
    for name in backend_of(first)._stores:  # Spark's state store moves with the partition
        head, log = state_of(first_tester, name)
        if head is not None:
            tester.updateValueState(name + HEAD_SUFFIX, GROUP, head)
            tester.updateListState(name + LOG_SUFFIX, GROUP, log)
    start = len(BATCHES[0])
    for batch, outs in zip(BATCHES[1:], expected[1:], strict=True):
        assert feed(tester, batch, start) == outs
        start += len(batch)
    written = sum(1 for name in backend_of(first)._stores if state_of(first_tester, name)[0] is not None)
    assert backend_of(second).rebuilds == written  # once per state, then warm


def test_a_batch_whose_state_spark_did_not_commit_is_never_read_back_from_the_copy() -> None:
    """Batch 2 runs and moves the local copy to its token, then Spark does not commit it (the
    task failed after its state writes): the state store still holds batch 1's head and log.
    The retry of batch 2 must see batch 1's state — the copy's newer version must not be used."""
    tested = processor(Strategy.VALUE)
    tester = TwsTester(tested)
    expected = expected_outputs(BATCHES)
    feed(tester, BATCHES[0], 0)
    start = len(BATCHES[0])
    assert feed(tester, BATCHES[1], start) == expected[1]
    name = next(iter(backend_of(tested)._stores))
    committed = (
        tester.peekValueState(name + HEAD_SUFFIX, GROUP),
        tester.peekListState(name + LOG_SUFFIX, GROUP),
    )
    start += len(BATCHES[1])
    assert feed(tester, BATCHES[2], start) == expected[2]  # its copy moved on ...
    head, log = committed  # ... but Spark rolls the task's state back
    assert head is not None
    tester.updateValueState(name + HEAD_SUFFIX, GROUP, head)
    tester.updateListState(name + LOG_SUFFIX, GROUP, log)
    rebuilds = backend_of(tested).rebuilds
    assert feed(tester, BATCHES[2], start) == expected[2]  # the retry: batch 1's state, exactly
    assert backend_of(tested).rebuilds == rebuilds + 1
    start += len(BATCHES[2])
    assert feed(tester, BATCHES[3], start) == expected[3]


@pytest.mark.parametrize("inline_max", [0, INLINE_MAX], ids=["to-log", "to-inline"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_bucket_written_by_the_blob_layout_continues_on_the_log_layout(
    strategy: Strategy, inline_max: int
) -> None:
    expected = expected_outputs(BATCHES)
    old = processor(strategy, scope=None)  # the blob layout (earlier builds' checkpoints)
    old_tester = TwsTester(old)
    assert feed(old_tester, BATCHES[0], 0) == expected[0]
    new = processor(strategy, inline_max=inline_max)
    tester = TwsTester(new)
    names = list(backend_of(old)._stores)
    for name in names:  # the checkpoint's state as the new build finds it
        blob = old_tester.peekValueState(name, GROUP)
        if blob is not None:
            tester.updateValueState(name, GROUP, blob)
    start = len(BATCHES[0])
    for batch, outs in zip(BATCHES[1:], expected[1:], strict=True):
        assert feed(tester, batch, start) == outs
        start += len(batch)
    for name in names:
        assert tester.peekValueState(name, GROUP) is None  # the blob was cleared once rewritten
        assert form_of(tester, name) in ("empty", "inline" if inline_max else "log")


def test_the_log_is_compacted_and_stays_proportional_to_the_live_entries() -> None:
    tested = processor(Strategy.VALUE)
    tester = TwsTester(tested)
    model = ModelMaterializer(KEYS)
    start, rows = 0, {key: f"v0-{key}" for key in range(50)}
    batches = [[insert(key, 0, rows[key]) for key in rows]]
    for number in range(1, 80):  # every batch rewrites the same 50 keys: the log grows by 50
        batch = []
        for key in rows:
            batch += [update_before(key, 0, rows[key]), update_after(key, 0, f"v{number}-{key}")]
            rows[key] = f"v{number}-{key}"
        batches.append(batch)
    for batch in batches:
        outs = [(start + i, out) for i, c in enumerate(batch) if (out := model.process(c)) is not None]
        assert feed(tester, batch, start) == outs
        start += len(batch)
    name = next(iter(backend_of(tested)._stores))
    log = tester.peekListState(name + LOG_SUFFIX, GROUP)
    assert 1 <= len(log) <= (2 * 50 + COMPACT_MIN) // 50 + 2


def test_every_key_deleted_clears_the_log_and_the_head() -> None:
    tested = processor(Strategy.VALUE)
    tester = TwsTester(tested)
    feed(tester, [insert(1, 0, "a"), insert(2, 0, "b")], 0)
    feed(tester, [delete(1, 0, "a"), delete(2, 0, "b")], 2)
    name = next(iter(backend_of(tested)._stores))
    assert tester.peekListState(name + LOG_SUFFIX, GROUP) == []
    assert tester.peekValueState(name + HEAD_SUFFIX, GROUP) is None
    assert feed(tester, [insert(1, 1, "c")], 4) == [(4, insert(1, 1, "c"))]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.sampled_from(["+I", "-U", "+U", "-D"]), st.integers(0, 6), st.integers(0, 2)),
                min_size=1,
                max_size=12,
            ),
            st.sampled_from(["warm", "lost", "retry"]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([0, 40, 90, INLINE_MAX]),
)
def test_generated_batches_equal_the_model_whatever_happens_to_the_copy(
    steps: list[tuple[list[tuple[str, int, int]], str]], inline_max: int
) -> None:
    """Random batches (adds and retractions of few keys and values), each after one of: a warm
    copy, a lost copy, or a retry of the previous batch whose state Spark did not commit; the
    inline bound such that states stay logged (0), move to the log after a few entries (40, 90)
    or stay inline."""
    import tempfile

    from upsertmat.impls.state import spark_cache

    with tempfile.TemporaryDirectory() as scratch, pytest.MonkeyPatch.context() as patch:
        patch.setenv(DIRECTORY_VARIABLE, scratch)
        spark_cache._CACHES.clear()
        tested = processor(Strategy.ADAPTIVE, inline_max=inline_max)
        tester = TwsTester(tested)
        model, start = ModelMaterializer(KEYS), 0
        names = list(backend_of(tested)._stores)
        for ops, event in steps:
            batch = [Change(RowKind.parse(op), (key, value)) for op, key, value in ops]
            if event == "lost":
                shutil.rmtree(scratch, ignore_errors=True)
                spark_cache._CACHES.clear()
            before = {name: (state_of(tester, name)) for name in names}
            if event == "retry":  # a first attempt whose state Spark does not commit
                feed(tester, batch, start)
                for name, (head, log) in before.items():
                    if head is None:
                        tester.deleteState(name + HEAD_SUFFIX, GROUP)
                    else:
                        tester.updateValueState(name + HEAD_SUFFIX, GROUP, head)
                    tester.updateListState(name + LOG_SUFFIX, GROUP, log)
            outs = [(start + i, out) for i, c in enumerate(batch) if (out := model.process(c)) is not None]
            assert feed(tester, batch, start) == sorted(outs)
            start += len(batch)
        spark_cache._CACHES.clear()


def test_the_local_copy_moves_only_from_the_token_it_holds(tmp_path: Path) -> None:
    from upsertmat.impls.state.spark_cache import LocalStateCache, namespace

    cache = LocalStateCache(tmp_path / "copy")
    space, other = namespace("q", "s", b"g1"), namespace("q", "s", b"g2")
    cache.replace(space, b"T1", {b"b": b"2", b"a": b"1"})
    cache.replace(other, b"X", {b"a": b"other"})
    reader = cache.begin(space, b"T1")
    assert reader is not None and list(cache.items(reader, space)) == [(b"a", b"1"), (b"b", b"2")]
    cache.update(space, b"T2", b"T3", {b"a": None})  # a writer that started elsewhere: refused
    assert cache.get(reader, space, b"a") == b"1"  # and the open read sees its snapshot anyway
    cache.end(reader)
    assert cache.begin(space, b"T3") is None
    cache.update(space, b"T1", b"T2", {b"a": None, b"c": b"3"})
    reader = cache.begin(space, b"T2")
    assert reader is not None and list(cache.items(reader, space)) == [(b"b", b"2"), (b"c", b"3")]
    cache.end(reader)
    assert cache.begin(space, b"T1") is None  # the old version is gone
    cache.drop(space)
    assert cache.begin(space, b"T2") is None
    reader = cache.begin(other, b"X")  # other namespaces untouched
    assert reader is not None and cache.get(reader, other, b"a") == b"other"
    cache.end(reader)


def test_a_copy_that_cannot_be_opened_turns_itself_off_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from upsertmat.impls.state.spark_cache import LocalStateCache, namespace

    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cache = LocalStateCache(blocker / "copy")
    space = namespace("q", "s", b"g")
    assert cache.begin(space, b"T") is None
    cache.replace(space, b"T", {b"a": b"1"})  # no error: nothing cached
    assert cache.begin(space, b"T") is None and not cache.enabled
    warnings = [record.getMessage() for record in caplog.records if record.name == "upsertmat.spark.state"]
    assert len(warnings) == 1 and "is off in this process" in warnings[0]


def form_of(tester: TwsTester, name: str) -> str:
    """``inline``, ``log`` or ``empty``: how Spark holds state ``name`` of the grouping key."""
    head, log = state_of(tester, name)
    if head is None:
        assert log == []
        return "empty"
    decoded = msgpack.unpackb(head[0], raw=False)
    if len(decoded) == 1:
        assert log == []  # an inline state has no log
        return "inline"
    assert len(decoded) == 3 and log
    return "log"


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_small_state_is_kept_inline_and_a_warm_batch_makes_two_calls_per_state(strategy: Strategy) -> None:
    tested = processor(strategy, inline_max=INLINE_MAX)
    tester = TwsTester(tested)
    start = 0
    for number, (batch, expected) in enumerate(zip(BATCHES, expected_outputs(BATCHES), strict=True)):
        before = backend_of(tested).traffic()
        assert feed(tester, batch, start) == expected
        start += len(batch)
        backend = backend_of(tested)
        names = [name for name in backend._stores if form_of(tester, name) != "empty"]
        assert names and all(form_of(tester, name) == "inline" for name in names)
        if number > 0 and strategy is Strategy.VALUE:  # one state, touched every batch
            assert backend.traffic()[0] - before[0] == 2  # the head read, the head written
    assert backend_of(tested).rebuilds == 0  # the local copy is never read


def _long_rows(count: int, rng: random.Random) -> dict[int, str]:
    return {key: rng.randbytes(16).hex() for key in range(count)}  # incompressible: sizes known


def test_a_state_moves_to_the_log_when_it_outgrows_the_head_and_back_after_compaction() -> None:
    """With an inline bound of 2,000 bytes: 300 keys of 32 incompressible characters (~15 KB)
    go to the log; once all but 5 are deleted, the compaction (logged > 2 * live + COMPACT_MIN)
    brings them back inline. Each move is then retried as Spark would after a failed task (the
    state store as before the batch): the retry must see the committed form, not the copy."""
    rng = random.Random(43)
    tested = processor(Strategy.VALUE, inline_max=2000)
    tester = TwsTester(tested)
    model, start = ModelMaterializer(KEYS), 0
    rows = _long_rows(300, rng)
    name = "?"

    def run(batch: list[Change], retry: bool = False) -> None:
        nonlocal start
        committed = state_of(tester, name) if retry else None
        outs = [(start + i, out) for i, c in enumerate(batch) if (out := model.process(c)) is not None]
        if committed is not None:
            assert feed(tester, batch, start) == sorted(outs)  # its state is thrown away:
            head, log = committed
            if head is None:
                tester.deleteState(name + HEAD_SUFFIX, GROUP)
            else:
                tester.updateValueState(name + HEAD_SUFFIX, GROUP, head)
            tester.updateListState(name + LOG_SUFFIX, GROUP, log)
        assert feed(tester, batch, start) == sorted(outs)
        start += len(batch)

    run([insert(key, 0, rows[key]) for key in range(3)])
    name = next(iter(backend_of(tested)._stores))
    assert form_of(tester, name) == "inline"
    run([insert(key, 0, rows[key]) for key in range(3, 300)], retry=True)  # inline -> log, retried
    assert form_of(tester, name) == "log"
    for _ in (1, 2):  # rewrite every key twice: 600 more logged entries
        batch = []
        for key in range(300):
            new = rng.randbytes(16).hex()
            batch += [update_before(key, 0, rows[key]), update_after(key, 0, new)]
            rows[key] = new
        run(batch)
        assert form_of(tester, name) == "log"
    run([delete(key, 0, rows[key]) for key in range(5, 300)], retry=True)  # compacted: back inline
    assert form_of(tester, name) == "inline"
    run([update_before(0, 0, rows[0]), update_after(0, 1, "after")])
    assert form_of(tester, name) == "inline"
    run([delete(key, 0, rows[key]) for key in range(1, 5)] + [delete(0, 1, "after")])
    assert form_of(tester, name) == "empty"


def test_a_head_of_the_earlier_log_only_form_continues() -> None:
    """A checkpoint whose heads are all ``[token, logged, live]`` (written before the inline form
    existed, here: with inline_max 0) continues under the default bound, and compaction of a
    small log brings it inline."""
    old = processor(Strategy.MAP)
    old_tester = TwsTester(old)
    expected = expected_outputs(BATCHES)
    assert feed(old_tester, BATCHES[0], 0) == expected[0]
    new = processor(Strategy.MAP, inline_max=INLINE_MAX)
    tester = TwsTester(new)
    names = [name for name in backend_of(old)._stores if state_of(old_tester, name)[0] is not None]
    for name in names:
        head, log = state_of(old_tester, name)
        tester.updateValueState(name + HEAD_SUFFIX, GROUP, head)
        tester.updateListState(name + LOG_SUFFIX, GROUP, log)
    assert names and all(form_of(tester, name) == "log" for name in names)
    start = len(BATCHES[0])
    for batch, outs in zip(BATCHES[1:], expected[1:], strict=True):
        assert feed(tester, batch, start) == outs
        start += len(batch)


def test_a_damaged_head_is_refused_with_the_state_named() -> None:
    from upsertmat.impls.state.errors import CorruptStateError

    tested = processor(Strategy.VALUE, inline_max=INLINE_MAX)
    tester = TwsTester(tested)
    feed(tester, BATCHES[0], 0)
    name = next(iter(backend_of(tested)._stores))
    tester.updateValueState(name + HEAD_SUFFIX, GROUP, (msgpack.packb([1, 2], use_bin_type=True),))
    with pytest.raises(CorruptStateError, match=f"state {name!r}: cannot decode the log's head"):
        feed(tester, BATCHES[1], len(BATCHES[0]))
