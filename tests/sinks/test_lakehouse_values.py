"""The Delta Lake and Iceberg sinks without Spark: a composite primary key, deletes, values kept
exactly (doubles with -0.0, booleans, nulls), a replayed batch skipped, the changelog, and the
tables read by the independent reader (no Spark: the sinks run on the driver)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from upsertmat.sinks import Column, last_batch, last_position, open_sink, read_changes, read_snapshot

from .lakereaders import delta_rows, iceberg_rows, replay_delta

COLUMNS = [Column("a", "bigint"), Column("b", "string"), Column("x", "double"), Column("f", "boolean")]
PK = (0, 1)


def url_of(kind: str, tmp_path: Path) -> str:
    return f"delta:///{tmp_path / 'd'}" if kind == "delta" else f"iceberg:///{tmp_path / 'w'}"


def independent(kind: str, tmp_path: Path) -> list[tuple[Any, ...]]:
    return sorted(delta_rows(tmp_path / "d") if kind == "delta" else iceberg_rows(tmp_path / "w", "t"))


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_batches_keys_and_changelog(kind: str, tmp_path: Path) -> None:
    url = url_of(kind, tmp_path)
    sink = open_sink(url, "t", COLUMNS, PK, changelog=True)
    assert last_batch(url, "t") is None and last_position(url, "t") == 0
    first = [("+I", (1, "k", 0.5, True)), ("+I", (1, "l", -0.0, None)), ("+I", (2, "k", None, False))]
    assert not sink.apply_batch("q", 0, first).skipped
    second = [("-U", (1, "k", 0.5, True)), ("+U", (1, "k", 1.5, True)), ("-D", (1, "l", -0.0, None)),
              ("-U", (2, "k", None, False)), ("+U", (2, "k", None, False))]  # fmt: skip
    outcome = sink.apply_batch("q", 1, second)
    assert (outcome.upserts, outcome.deletes, outcome.skipped) == (2, 1, False)
    assert sink.apply_batch("q", 1, [("-D", (2, "k", None, False))]).skipped  # replayed: a no-op
    assert sink.apply_batch("other", 0, []).skipped is False  # an empty batch commits nothing
    expected = [(1, "k", 1.5, True), (2, "k", None, False)]
    assert sink.rows() == expected == independent(kind, tmp_path)
    assert sink.committed_batches() == 2
    sink.close()
    snapshot = read_snapshot(url, "t", ["a", "b"])
    assert (snapshot.batch_id, snapshot.rows, snapshot.columns) == (1, tuple(expected), ("a", "b", "x", "f"))
    changes = [(c.batch_id, c.op, c.row) for c in read_changes(url, "t", 0, 100)]
    assert changes == [
        (0, "+I", (1, "k", 0.5, True)),
        (0, "+I", (1, "l", -0.0, None)),
        (0, "+I", (2, "k", None, False)),
        (1, "-D", (1, "l", -0.0, None)),
        (1, "-U", (1, "k", 0.5, True)),
        (1, "+U", (1, "k", 1.5, True)),
    ]  # key (2, k) was rewritten unchanged: no change recorded
    assert str(read_changes(url, "t", 0, 100)[3].row[2]) == "-0.0"
    assert last_position(url, "t") == read_changes(url, "t", 0, 100)[-1].pos
    if kind == "delta":
        assert replay_delta(tmp_path / "d").batches == [0, 1]


def test_a_table_with_other_columns_is_refused(tmp_path: Path) -> None:
    open_sink(url_of("delta", tmp_path), "t", COLUMNS, PK).close()
    with pytest.raises(
        Exception, match="has columns \\['a', 'b', 'x', 'f'\\], the job writes \\['a', 'z'\\]"
    ):
        open_sink(url_of("delta", tmp_path), "t", [Column("a", "bigint"), Column("z", "string")], (0,))


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
@pytest.mark.parametrize(("pk", "seed"), [((0, 1), 0), ((0, 2), 1)], ids=["int-string-key", "int-double-key"])
def test_random_batches_equal_a_dict_per_batch(
    kind: str, pk: tuple[int, int], seed: int, tmp_path: Path
) -> None:
    """Batches of random net changes (upserts and deletes of present and absent keys; a
    composite key, one of them with a double whose -0.0 and 0.0 are one key) leave the table
    equal to a dict, batch by batch, read by the sink and by the independent reader; small
    batches keep some files untouched (the Iceberg sink rewrites only the files holding a
    touched key)."""
    rng = random.Random(seed)
    url = url_of(kind, tmp_path)
    sink = open_sink(url, "t", COLUMNS, pk)
    model: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for batch in range(10):
        changes: list[tuple[str, tuple[Any, ...]]] = []
        for _ in range(rng.choice([1, 2, 8])):
            row = (
                rng.randrange(6),
                rng.choice(["k", "l"]),
                rng.choice([0.5, -0.0, 0.0, 2.25] if pk == (0, 2) else [0.5, -0.0, None]),
                rng.choice([True, False, None]),
            )
            key = (row[pk[0]], row[pk[1]])
            if rng.random() < 0.3:
                changes.append(("-D", model.get(key, row)))
                model.pop(key, None)
            else:
                changes.append(("+U" if key in model else "+I", row))
                model[key] = row
        sink.apply_batch("q", batch, changes)
        expected = sorted(model.values(), key=repr)
        assert sorted(sink.rows(), key=repr) == expected, f"batch {batch}"
        assert sorted(independent(kind, tmp_path), key=repr) == expected, f"batch {batch}"
    sink.close()
