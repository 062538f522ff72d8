"""The demo's generated data is a valid shuffled changelog that breaks a blind sink (no Spark)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from upsertmat.demo.report import side_by_side, summary
from upsertmat.demo.tables import blind_upsert, disagreements, expected_table
from upsertmat.demo.workload import DemoShape, generate, write_source
from upsertmat.spec import Change, Keys, RowKind, run_model

EXAMPLE_DATA = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "users-levels" / "changes.jsonl"
SHAPES = [DemoShape(), DemoShape(users=10, levels=3, channels=2, events=80, seed=1), DemoShape(seed=123)]


@pytest.mark.parametrize("shape", SHAPES)
def test_channels_are_fifo_and_routed_by_the_join_key(shape: DemoShape) -> None:
    data = generate(shape)
    assert Counter(data.arrival) == Counter(data.logical)  # a permutation
    for channel in range(shape.channels):
        logical = [c for c in data.logical if c.level % shape.channels == channel]
        arrived = [c for c, ch in zip(data.arrival, data.channels, strict=True) if ch == channel]
        assert arrived == logical
    assert all(c.level % shape.channels == ch for c, ch in zip(data.arrival, data.channels, strict=True))


@pytest.mark.parametrize("shape", SHAPES)
def test_every_retraction_arrives_after_its_add(shape: DemoShape) -> None:
    live: Counter[tuple[int, int, str]] = Counter()
    for change in generate(shape).arrival:
        if change.op in ("+I", "+U"):
            live[change.row] += 1
        else:
            assert live[change.row] > 0, change
            live[change.row] -= 1


@pytest.mark.parametrize("shape", SHAPES)
def test_the_model_repairs_the_arrival_order(shape: DemoShape) -> None:
    data = generate(shape)
    changes = [Change(RowKind.parse(c.op), c.row) for c in data.arrival]
    table: dict[int, tuple[object, ...]] = {}
    for out in run_model(Keys(pk=(0,)), changes):
        if out is None:
            continue
        if out.kind.is_add:
            table[int(str(out.row[0]))] = tuple(out.row)
        else:
            table.pop(int(str(out.row[0])), None)
    expected = expected_table(data.logical)
    assert disagreements(table, expected) == []
    assert len(disagreements(blind_upsert(data.arrival), expected)) > 0


def test_deterministic_and_seed_dependent() -> None:
    assert generate(DemoShape(seed=5)) == generate(DemoShape(seed=5))
    assert generate(DemoShape(seed=5)).arrival != generate(DemoShape(seed=6)).arrival


def test_shape_validation() -> None:
    with pytest.raises(ValueError, match="levels must be at least 2"):
        DemoShape(levels=1)
    with pytest.raises(ValueError, match="channels must be at least 1"):
        DemoShape(channels=0)


def test_source_file_and_the_shipped_example_match(tmp_path: Path) -> None:
    path = write_source(generate(), tmp_path / "src")
    assert [p.name for p in (tmp_path / "src").iterdir()] == ["changes.jsonl"]
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["seq"] for r in records] == list(range(len(records)))
    assert set(records[0]) == {"seq", "op", "id", "level", "badge"}
    assert path.read_text() == EXAMPLE_DATA.read_text()  # examples/jobs is the default demo data


def test_disagreements_are_type_exact_and_reported() -> None:
    expected = {1: (1, 2, "a"), 2: (2, 3, "b")}
    assert disagreements({1: (1, 2.0, "a"), 2: (2, 3, "b")}, expected) == [1]
    assert disagreements({1: (1, 2, "a")}, expected) == [2]
    assert disagreements({**expected, 3: (3, 1, "c")}, expected) == [3]
    text = side_by_side(expected, {1: (1, 2, "a")}, expected)
    line = next(line for line in text.splitlines()[2:] if line.split()[0] == "2")
    assert line.split() == ["2", "level", "3", "b", "(missing)", "!", "level", "3", "b"]
    assert "without materializer: 1 (1 rows wrongly deleted, 0 wrong or extra)" in summary(
        expected, {1: (1, 2, "a")}, expected
    )
