"""Corpus test: ``upsertmat replay`` equals the reference model, change for change.

Many seeded random streams (docs/spec.md section 5 and rule 4: a logically ordered upstream
changelog routed to
parallel channels by a non-key column and merged preserving each channel's order, plus junk
the operator must tolerate: retractions of rows never added, duplicates, ``+U`` into empty
state, clock lines, blank lines, values that Python confuses such as ``1``/``1.0``/``true``)
go through the CLI (``--strategy legacy --backend heap``), whole and split over
``--state-dir``. The expected output is computed here, independently of the CLI's parser and
formatter: ``json.loads`` each line, feed :class:`upsertmat.spec.ModelMaterializer`, and
``json.dumps`` what it emits. The comparison is of the output text, exactly.
"""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import pytest

from upsertmat.cli import main
from upsertmat.spec import Change, JsonValue, Keys, ModelMaterializer, RowKind

STREAMS = 120
VALUES: list[JsonValue] = [1, 1.0, True, None, "1", 0, -0.0, "é", [1], {"a": 1, "b": [None]}, 2**70]


def logical_changelog(rnd: random.Random, upsert_key: bool, size: int) -> list[Change]:
    """A logically ordered changelog on few sink keys (column 0) and few upsert keys (column 1)."""
    live: dict[int, list[JsonValue]] = {}  # upsert key -> current row (or any live row without one)
    changes: list[Change] = []
    while len(changes) < size:
        ukey = rnd.randrange(4)
        if ukey not in live:
            row: list[JsonValue] = [rnd.randrange(3), ukey, rnd.choice(VALUES)]
            live[ukey] = row
            changes.append(Change(RowKind.INSERT, tuple(row)))
            continue
        old = live[ukey]
        roll = rnd.random()
        if roll < 0.25:
            del live[ukey]
            changes.append(Change(RowKind.DELETE, tuple(old)))
            continue
        # an update keeps the upsert key; it may move the row to another sink key
        new = [old[0] if rnd.random() < 0.7 else rnd.randrange(3), ukey, rnd.choice(VALUES)]
        live[ukey] = new
        if roll > 0.9 and upsert_key:
            changes.append(Change(RowKind.UPDATE_AFTER, tuple(new)))  # upsert style: no -U
        else:
            changes.append(Change(RowKind.UPDATE_BEFORE, tuple(old)))
            changes.append(Change(RowKind.UPDATE_AFTER, tuple(new)))
    return changes


def shuffle_by_channels(rnd: random.Random, changes: list[Change], upsert_key: bool) -> list[Change]:
    """Route each change to a channel by a non-key column and merge keeping each channel's order.

    With an upsert key the route is its column (1), otherwise the whole row's non-PK columns,
    so an ADD and its RETRACT share a channel (the guarantee of docs/spec.md section 1).
    """
    channels: list[list[Change]] = [[] for _ in range(rnd.randint(1, 4))]
    for change in changes:
        route = change.row[1] if upsert_key else json.dumps(change.row[1:])
        channels[zlib.crc32(str(route).encode()) % len(channels)].append(change)
    merged: list[Change] = []
    while any(channels):
        channel = rnd.choice([c for c in channels if c])
        merged.append(channel.pop(0))
    return merged


def with_junk(rnd: random.Random, changes: list[Change]) -> list[str]:
    """Input lines: the changes plus tolerated junk, clock advances and blank lines."""
    lines: list[str] = []
    clock = 0
    for change in changes:
        roll = rnd.random()
        if roll < 0.04:
            row = [rnd.randrange(3), rnd.randrange(4), rnd.choice(VALUES)]
            lines.append(json.dumps({"op": rnd.choice(["-U", "-D"]), "row": row}))  # never added
        elif roll < 0.08 and lines:
            lines.append(rnd.choice(lines))  # a duplicate of an earlier line
        elif roll < 0.10:
            lines.append(json.dumps({"op": "+U", "row": [7, rnd.randrange(4), "lonely"]}))  # +U into empty
        elif roll < 0.13:
            clock += rnd.randrange(1000)
            lines.append(json.dumps({"time": clock}))
        elif roll < 0.15:
            lines.append("")
        record: dict[str, object] = {"op": change.kind.value, "row": list(change.row)}
        if rnd.random() < 0.5:
            record["ts"] = rnd.randrange(10_000)
        lines.append(json.dumps(record, ensure_ascii=rnd.random() < 0.5))
    return [line + "\n" for line in lines]


def model_output(lines: list[str], keys: Keys) -> tuple[str, int]:
    """What the CLI must print, computed with the model and the json module only; and the
    number of retractions that matched nothing."""
    model = ModelMaterializer(keys)
    out: list[str] = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        record = json.loads(line)
        if "time" in record:
            model.advance_time(record["time"])
            continue
        emitted = model.process(Change(RowKind(record["op"]), tuple(record["row"]), record.get("ts")))
        if emitted is not None:
            row = json.dumps(list(emitted.row), ensure_ascii=False)
            out.append(f'{{"in": {index}, "op": "{emitted.kind.value}", "row": {row}}}\n')
    return "".join(out), model.retract_misses


def replay(tmp_path: Path, name: str, lines: list[str], *flags: str) -> str:
    source, target = tmp_path / f"{name}.in", tmp_path / f"{name}.out"
    source.write_text("".join(lines), encoding="utf-8")
    code = main(
        ["replay", "-q", "--strategy", "legacy", "--backend", "heap", *flags, str(source), "-o", str(target)]
    )
    assert code == 0
    return target.read_text(encoding="utf-8")


@pytest.mark.parametrize("seed", range(STREAMS))
def test_replay_equals_the_model_change_for_change(seed: int, tmp_path: Path) -> None:
    rnd = random.Random(seed)
    upsert_key = seed % 2 == 1
    keys = Keys(pk=(0,), upsert_key=(1,) if upsert_key else ())
    logical = logical_changelog(rnd, upsert_key, size=rnd.randint(5, 150))
    lines = with_junk(rnd, shuffle_by_channels(rnd, logical, upsert_key))
    flags = ["--pk", "0", *(["--upsert-key", "1"] if upsert_key else [])]
    expected, _ = model_output(lines, keys)
    assert replay(tmp_path, "whole", lines, *flags) == expected

    cuts = sorted(rnd.sample(range(len(lines) + 1), k=min(3, len(lines) + 1)))
    parts = [
        # Parts are named by their position: two parts may hold the same bytes by chance, and
        # content alone would take the second for a rerun of the first.
        replay(
            tmp_path,
            f"part{n}",
            lines[a:b],
            *flags,
            "--state-dir",
            str(tmp_path / "st"),
            "--stream-line",
            str(a),
        )
        for n, (a, b) in enumerate(zip([0, *cuts], [*cuts, len(lines)], strict=True))
    ]
    assert "".join(parts) == expected


def test_the_corpus_is_not_trivial() -> None:
    """The generators produce what the test claims: out-of-order arrivals, junk, every output kind."""
    kinds: set[str] = set()
    reordered = misses = 0
    for seed in range(STREAMS):
        rnd = random.Random(seed)
        upsert_key = seed % 2 == 1
        logical = logical_changelog(rnd, upsert_key, size=rnd.randint(5, 150))
        arrival = shuffle_by_channels(rnd, logical, upsert_key)
        reordered += arrival != logical
        lines = with_junk(rnd, arrival)
        keys = Keys(pk=(0,), upsert_key=(1,) if upsert_key else ())
        output, missed = model_output(lines, keys)
        kinds |= {json.loads(line)["op"] for line in output.splitlines()}
        misses += missed > 0
    assert kinds == {"+I", "+U", "-D"}
    assert reordered > STREAMS // 2
    assert misses > STREAMS // 2
