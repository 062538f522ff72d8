"""The shared sink suite on the Paimon sink, read back by Paimon's format read without pypaimon
(tests/sinks/paimon_reader.py); then what is Paimon's own: the batch id as the commit identifier
of the query's commit user, writes that touch only the keys of the batch, the sink's Arrow merge
against pypaimon's own reader, changes across maintenance, and maintenance refused while a batch
commits."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from upsertmat.sinks import Column, SinkError, kind_of, open_sink, read_changes, read_snapshot

from ..prerequisites import require_module
from .suite import COLUMNS, FIRST, PK, SECOND, TABLE, BatchSinkTests, Row, by_key, same

require_module("pypaimon", "pypaimon (the 'lakehouse' extra)")
from upsertmat.sinks import paimon  # noqa: E402 (after the prerequisite, as after importorskip)

from .paimon_reader import paimon_batches, paimon_commits, paimon_rows, state  # noqa: E402 (after the prerequisite, as after importorskip)


def warehouse_of(url: str) -> Path:
    return Path(url.removeprefix("paimon:///"))


class TestPaimonSink(BatchSinkTests):
    kind_name = "paimon"

    def url(self, tmp_path: Path) -> str:
        return f"paimon:///{tmp_path / 'warehouse'}"

    def independent_rows(self, url: str, table: str) -> list[Row]:
        return paimon_rows(warehouse_of(url), table)


def _url(tmp_path: Path) -> str:
    return f"paimon:///{tmp_path / 'warehouse'}"


def test_the_batch_id_is_the_commit_identifier_of_the_querys_commit_user(tmp_path: Path) -> None:
    url = _url(tmp_path)
    sink = open_sink(url, TABLE, COLUMNS, PK)
    try:
        sink.apply_batch("q", 0, FIRST)
        sink.apply_batch("q", 1, SECOND)
        assert sink.apply_batch("q", 1, SECOND).skipped
        assert not sink.apply_batch("other", 1, [("+I", (5, "e", 1.0, True))]).skipped  # another query
        assert sink.apply_batch("other", 0, [("+I", (6, "f", 1.0, True))]).skipped  # its batch 1 is in
    finally:
        sink.close()
    commits = paimon_commits(tmp_path / "warehouse", TABLE)
    assert [(user, identifier, kind) for user, identifier, kind, _ in commits] == [
        ("upsertmat-q", 0, "APPEND"),
        ("upsertmat-q", 1, "APPEND"),
        ("upsertmat-other", 1, "APPEND"),
    ]
    assert commits[1][3] == {"upsertmat.batch": "1", "upsertmat.query": "q"}
    assert paimon_batches(tmp_path / "warehouse", TABLE) == [0, 1, 1]


def test_a_batch_writes_its_keys_only_as_row_kinds(tmp_path: Path) -> None:
    """A batch adds one file per bucket it touches with its keys only: nothing of the table is
    rewritten. Upserts are +U rows, deletes -D rows of the key (a key the table never held too:
    the writer does not read the table)."""
    url = _url(tmp_path)
    rows = [(index, "k", float(index), True) for index in range(200)]
    sink = open_sink(url, TABLE, COLUMNS, PK)
    try:
        sink.apply_batch("q", 0, [("+I", row) for row in rows])
        before = state(tmp_path / "warehouse", TABLE)
        assert before is not None
        sink.apply_batch(
            "q", 1, [("+U", (3, "k", 9.0, False)), ("-D", rows[4]), ("-D", (999, "z", 0.0, None))]
        )
    finally:
        sink.close()
    after = state(tmp_path / "warehouse", TABLE)
    assert after is not None
    added = sorted(set(after.files) - set(before.files))
    assert set(before.files) <= set(after.files)  # nothing removed, nothing rewritten
    assert 1 <= len(added) <= paimon.DEFAULT_BUCKETS and all(level == 0 for _, _, level in added)
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    root = tmp_path / "warehouse" / "upsertmat.db" / TABLE
    written = sorted(
        (row["id"], row["_upsertmat_op"], row["_VALUE_KIND"], row["x"])
        for bucket, name, _ in added
        for row in pq.read_table(root / f"bucket-{bucket}" / name).to_pylist()
    )
    assert written == [(3, "+U", 2, 9.0), (4, "-D", 3, None), (999, "-D", 3, None)]
    assert after.schema["options"] == {
        "bucket": "4",
        "rowkind.field": "_upsertmat_op",
        "file.format": "parquet",
    }
    assert after.schema["primaryKeys"] == ["id", "name"]
    expected = by_key([(3, "k", 9.0, False), *[row for row in rows if row[0] not in (3, 4)]])
    assert same(by_key(paimon_rows(tmp_path / "warehouse", TABLE)), expected)


def _pypaimon_rows(url: str) -> list[Row]:
    data = kind_of(url).scan(url, TABLE)
    names = [column.name for column in COLUMNS]
    return by_key(list(zip(*(data.column(name).to_pylist() for name in names), strict=True)))


@pytest.mark.parametrize("seed", [0, 1])
def test_random_batches_equal_a_dict_by_three_readers(tmp_path: Path, seed: int) -> None:
    """Random net batches (upserts and deletes of present and absent keys) leave the table equal
    to a dict, batch by batch, read by the sink's Arrow merge, by pypaimon's own reader and by the
    independent reader; the changes of each batch replay onto the previous table to give the next;
    maintenance halfway leaves every reader and the changes as they were."""
    rng = random.Random(seed)
    url = _url(tmp_path)
    sink = open_sink(url, TABLE, COLUMNS, PK, changelog=True)
    model: dict[tuple[Any, ...], Row] = {}
    replayed: dict[tuple[Any, ...], Row] = {}
    seen = 0
    try:
        for batch in range(12):
            changes: list[tuple[str, Row]] = []
            for _ in range(rng.choice([1, 3, 12])):
                row = (
                    rng.randrange(8),
                    rng.choice(["k", "l"]),
                    rng.choice([0.5, -0.0, None]),
                    rng.choice([True, None]),
                )
                key = row[:2]
                if rng.random() < 0.3:
                    changes.append(("-D", model.get(key, row)))
                    model.pop(key, None)
                else:
                    changes.append(("+U" if key in model else "+I", row))
                    model[key] = row
            sink.apply_batch("q", batch, changes)
            if batch == 6:
                assert kind_of(url).maintain(url, TABLE)["files_after"] <= paimon.DEFAULT_BUCKETS
            expected = by_key(list(model.values()))
            assert same(sink.rows(), expected), f"batch {batch}"
            assert same(_pypaimon_rows(url), expected), f"batch {batch}"
            assert same(by_key(paimon_rows(tmp_path / "warehouse", TABLE)), expected), f"batch {batch}"
            found = read_changes(url, TABLE, seen, 1000)
            for index, change in enumerate(found):
                assert change.batch_id == batch
                changed = change.row[:2]
                if change.op in ("+I", "+U"):
                    assert changed not in replayed
                    if change.op == "+U":  # right after the -U of its key, and a change of the row
                        assert found[index - 1].op == "-U" and found[index - 1].row[:2] == changed
                        assert not same([found[index - 1].row], [change.row])
                    replayed[changed] = change.row
                else:
                    assert same(
                        [replayed.pop(changed)], [change.row]
                    )  # a retraction names the row it removes
                seen = change.pos
            assert same(by_key(list(replayed.values())), expected), f"batch {batch}"
            pos = read_snapshot(url, TABLE, ["id", "name"]).changes_pos
            assert pos == (seen if found else (batch << 32))  # no change: just before the batch's first
    finally:
        sink.close()


def test_a_rewrite_is_refused_when_a_batch_commits_meanwhile(tmp_path: Path) -> None:
    url = _url(tmp_path)
    sink = open_sink(url, TABLE, COLUMNS, PK)
    try:
        sink.apply_batch("q", 0, FIRST)
        table = paimon.open_table(tmp_path / "warehouse", TABLE)
        rewrite = paimon.prepare_rewrite(table)
        assert rewrite is not None
        sink.apply_batch("q", 1, SECOND)  # commits between the rewrite's read and its commit
        with pytest.raises(SinkError, match="changed while maintenance rewrote it"):
            rewrite.commit_rewrite()
        expected = by_key([(1, "a", 1.5, True), (2, "a", None, False), *[row for _, row in FIRST[3:]]])
        assert same(sink.rows(), expected)
        assert same(by_key(paimon_rows(tmp_path / "warehouse", TABLE)), expected)
        assert [kind for _, _, kind, _ in paimon_commits(tmp_path / "warehouse", TABLE)] == [
            "APPEND",
            "APPEND",
        ]
        done = kind_of(url).maintain(url, TABLE)  # between batches it rewrites
        rewritten = state(tmp_path / "warehouse", TABLE)
        assert rewritten is not None and rewritten.snapshot["commitKind"] == "OVERWRITE"
        assert (done["rows"], done["files_after"], done["expired_snapshots"]) == (4, len(rewritten.files), 0)
        assert sink.apply_batch("q", 1, SECOND).skipped  # the exactly-once record survives it
        assert read_snapshot(url, TABLE, ["id", "name"]).batch_id == 1
        assert same(by_key(paimon_rows(tmp_path / "warehouse", TABLE)), expected)
    finally:
        sink.close()


def test_a_table_of_another_primary_key_or_column_types_is_refused(tmp_path: Path) -> None:
    url = _url(tmp_path)
    open_sink(url, TABLE, COLUMNS, PK).close()
    with pytest.raises(SinkError, match=r"has primary key \['id', 'name'\], the job's is \['id'\]"):
        open_sink(url, TABLE, COLUMNS, (0,))
    other_types = [
        Column("id", "bigint"),
        Column("name", "string"),
        Column("x", "string"),
        Column("flag", "boolean"),
    ]
    with pytest.raises(
        SinkError, match=r"has column types \{.*'x': 'double'.*\}, the job writes \{.*'x': 'string'"
    ):
        open_sink(url, TABLE, other_types, PK)
    with pytest.raises(SinkError, match="may not be called _upsertmat_op"):
        open_sink(url, "u", [Column("id", "bigint"), Column("_upsertmat_op", "string")], (0,))


def test_a_dropped_and_recreated_table_reads_its_own_changes(tmp_path: Path) -> None:
    """The changes a process computed are kept per snapshot; a table written again after a drop
    has new snapshots of the same ids, and its changes are its own."""
    url = _url(tmp_path)
    for value in (1.0, 2.0):
        sink = open_sink(url, TABLE, COLUMNS, PK, changelog=True)
        try:
            sink.apply_batch("q", 0, [("+I", (1, "a", value, True))])
        finally:
            sink.close()
        assert [(c.op, c.row) for c in read_changes(url, TABLE, 0, 10)] == [("+I", (1, "a", value, True))]
        kind_of(url).drop(url, TABLE)
    assert not (tmp_path / "warehouse" / "upsertmat.db" / TABLE).exists()


def test_a_bucket_whose_one_file_holds_a_delete_reads_without_the_key(tmp_path: Path) -> None:
    """pypaimon 2.1 records ``_DELETE_ROW_COUNT`` 0 for every file it writes; a reader then takes a
    bucket of one file as holding no deletes and reads it without merging, so a delete of a key
    the table never held came back as a row of nulls. The sink records the true count."""
    url = _url(tmp_path)
    sink = open_sink(url, TABLE, COLUMNS, PK)
    try:
        sink.apply_batch("q", 0, [("-D", (9, "z", 0.0, None))])
    finally:
        sink.close()
    found = state(tmp_path / "warehouse", TABLE)
    assert found is not None and list(found.retractions.values()) == [1]
    assert _pypaimon_rows(url) == [] == paimon_rows(tmp_path / "warehouse", TABLE)
    assert read_snapshot(url, TABLE, []).total == 0 and read_changes(url, TABLE, 0, 10) == []


@pytest.mark.parametrize("pk", [(0, 2), (3, 0)], ids=["int-double-key", "boolean-int-key"])
def test_keys_of_doubles_and_booleans(tmp_path: Path, pk: tuple[int, int]) -> None:
    """0.0 and -0.0 are two keys, as in upsertmat's spec (docs/spec.md) and in Paimon, which
    compares keys by their bytes; every reader and the changes keep them apart. (Inside one batch
    the two are one key: the base class reduces a batch with Python's ``==``.) A boolean key
    column reads and changes as any other."""
    url = _url(tmp_path)
    batches = [
        [("+I", (1, "a", -0.0, True))],
        [("+I", (1, "b", 0.0, False))],
        [("-D", (1, "a", -0.0, True))],
        [("+U", (1, "c", 0.0, False))],
    ]
    sink = open_sink(url, TABLE, COLUMNS, pk, changelog=True)
    try:
        for batch, changes in enumerate(batches):
            sink.apply_batch("q", batch, changes)
            if batch == 1:
                both = sorted([(1, "a", -0.0, True), (1, "b", 0.0, False)], key=repr)
                assert same(sorted(sink.rows(), key=repr), both)
                assert same(sorted(paimon_rows(tmp_path / "warehouse", TABLE), key=repr), both)
    finally:
        sink.close()
    expected = [(1, "c", 0.0, False)]
    assert same(_pypaimon_rows(url), expected) and same(paimon_rows(tmp_path / "warehouse", TABLE), expected)
    assert same(list(read_snapshot(url, TABLE, []).rows), expected)
    found = [(c.batch_id, c.op, c.row) for c in read_changes(url, TABLE, 0, 10)]
    assert found == [
        (0, "+I", (1, "a", -0.0, True)),
        (1, "+I", (1, "b", 0.0, False)),
        (2, "-D", (1, "a", -0.0, True)),
        (3, "-U", (1, "b", 0.0, False)),
        (3, "+U", (1, "c", 0.0, False)),
    ]
    assert [str(row[2]) for _, _, row in found] == ["-0.0", "0.0", "-0.0", "0.0", "0.0"]


def _written(sink: Any, query: str, batch: int, changes: list[tuple[str, Row]], parts: int) -> Any:
    """Batch ``batch`` staged by ``parts`` task writers (the keys split between them, as Spark's
    tasks hold them) and committed by the sink (the driver's part)."""
    from upsertmat.sinks import NetBatch, last_per_key

    writer = sink.task_writer(query, batch)
    outputs = []
    for part in range(parts):
        mine = [(op, row) for op, row in changes if hash((row[0], row[1])) % parts == part]
        upserts, deletes = last_per_key(mine, PK)
        outputs.append(writer.write(NetBatch(query, batch, len(mine), upserts, deletes)))
    return sink.commit_written(query, batch, outputs)


@pytest.mark.parametrize("seed", [0, 1])
def test_batches_written_by_task_writers_equal_the_driver_written_table(tmp_path: Path, seed: int) -> None:
    """Random batches of updates and deletes staged by several task writers and committed once
    leave the table the driver's ``apply_batch`` leaves, batch by batch, by two readers; each batch
    is ONE snapshot whose commit identifier is its id; a replayed batch is skipped."""
    rng = random.Random(seed)
    driver = open_sink(f"paimon:///{tmp_path / 'driver'}", TABLE, COLUMNS, PK)
    tasks = open_sink(f"paimon:///{tmp_path / 'tasks'}", TABLE, COLUMNS, PK)
    try:
        for batch in range(5):
            changes: list[tuple[str, Row]] = []
            for _ in range(rng.randrange(1, 60)):
                key = (rng.randrange(30), rng.choice("ab"))
                if rng.random() < 0.3:
                    changes.append(("-D", (*key, None, None)))
                else:
                    changes.append(("+U", (*key, rng.uniform(-9, 9), rng.random() < 0.5)))
            expected = driver.apply_batch("q", batch, changes)
            outcome = _written(tasks, "q", batch, changes, parts=3)
            assert (outcome.upserts, outcome.deletes, outcome.skipped) == (
                expected.upserts,
                expected.deletes,
                False,
            )
            assert same(tasks.rows(), driver.rows())
            assert same(by_key(paimon_rows(tmp_path / "tasks", TABLE)), driver.rows())
            assert _written(tasks, "q", batch, changes, parts=2).skipped
        assert tasks.committed_batches() == 5
        assert paimon_batches(tmp_path / "tasks", TABLE) == [0, 1, 2, 3, 4]
    finally:
        driver.close()
        tasks.close()


def test_a_duplicate_task_attempt_writes_files_no_commit_references(tmp_path: Path) -> None:
    """Two attempts of one task stage two sets of files; the driver commits one attempt's
    messages: the table holds each row once, and the other attempt's files are orphans."""
    from upsertmat.sinks import NetBatch

    url = _url(tmp_path)
    sink = open_sink(url, TABLE, COLUMNS, PK)
    try:
        rows: list[Row] = [(index, "k", float(index), True) for index in range(50)]
        writer = sink.task_writer("q", 0)
        assert writer is not None
        net = NetBatch("q", 0, len(rows), rows, [])
        failed = writer.write(net)  # the attempt Spark discards
        kept = writer.write(net)
        assert sink.commit_written("q", 0, [kept]).upserts == 50
        assert same(sink.rows(), by_key(rows))
        root = tmp_path / "warehouse" / "upsertmat.db" / TABLE
        on_disk = {path.name for path in root.glob("bucket-*/data-*")}
        found = state(tmp_path / "warehouse", TABLE)
        assert found is not None
        referenced = {name for _, name, _ in found.files}
        assert referenced < on_disk and len(on_disk - referenced) == len(failed.messages)
    finally:
        sink.close()


def test_commit_messages_cross_processes_in_paimons_encoding_not_pickle(tmp_path: Path) -> None:
    """The task writer's messages are Paimon's own wire format (decoded by parsing: bytes that are
    not a message are refused, nothing executed); the SQL sinks are written by the driver."""
    from upsertmat.sinks import NetBatch

    sink = open_sink(_url(tmp_path), TABLE, COLUMNS, PK)
    assert isinstance(sink, paimon.PaimonSink)
    try:
        writer = sink.task_writer("q", 0)
        output = writer.write(NetBatch("q", 0, 1, [(1, "a", 1.0, True)], []))
        assert output.messages and all(not message.startswith(b"\x80") for message in output.messages)
        with pytest.raises(Exception):  # noqa: B017 - a parse error of pypaimon's
            paimon.decode_messages(sink.paimon, [b"\x80\x04not a message"])
    finally:
        sink.close()
    sqlite = open_sink(f"sqlite:///{tmp_path / 'x.db'}", TABLE, COLUMNS, PK)
    try:
        assert sqlite.task_writer("q", 0) is None
    finally:
        sqlite.close()
