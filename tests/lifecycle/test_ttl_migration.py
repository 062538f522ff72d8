"""Migration with TTL on: savepoint, restore into another implementation, continue.

Per-element strategies migrate among themselves exactly (stamps travel with the elements):
the continued output equals the per-element model fed the whole stream. Across granularities
(LEGACY per key <-> per element) the rule of docs/operations.md holds: the importer gets the
exporter's elements — a LEGACY export gives every element the key's stamp, a per-key importer
takes the greatest element stamp — and the continued output equals a model of the target's
granularity that imported the same elements; it differs from an uninterrupted run in general
(the examples below show both directions).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from upsertmat.conformance.lifecycle import granularity_of
from upsertmat.impls.lifecycle import load_savepoint, save_savepoint
from upsertmat.spec import (
    Change,
    Granularity,
    Keys,
    Materializer,
    ModelMaterializer,
    RowKind,
    StateTransfer,
    TimeDomain,
    TtlSettings,
    canonical,
)

from .support import IMPLEMENTATIONS, NO_UPSERT_KEY, SMALL_THRESHOLDS, UPSERT_KEY, make, mixed_stream

PER_ELEMENT = [name for name in IMPLEMENTATIONS if granularity_of(name) is Granularity.PER_ELEMENT]
PER_KEY = [name for name in IMPLEMENTATIONS if granularity_of(name) is Granularity.PER_KEY]
TTL_MS = 30
LENGTH = 90
CUT = 45
SEED = 12

SCRIPT = shutil.which("upsertmat") or str(Path(sys.executable).with_name("upsertmat"))
Item = Change | int
"""A change, or an ``int``: advance the clock (processing time) / watermark (event time) to it."""


def timed_stream(seed: int, keys: Keys, domain: TimeDomain) -> list[Item]:
    """:func:`mixed_stream` with the clock advancing by 0-3 before changes; in event time every
    change carries ``ts = now + offset`` with offsets from -5 (late) to 3."""
    rnd = random.Random(seed)
    now = 0
    items: list[Item] = []
    for change in mixed_stream(seed, LENGTH, keys):
        if rnd.random() < 0.5:
            now += rnd.randrange(1, 4)
            items.append(now)
        if domain is TimeDomain.EVENT_TIME:
            change = Change(change.kind, change.row, ts=max(0, now + rnd.randrange(-5, 4)))
        items.append(change)
    return items


def run(materializer: Materializer | ModelMaterializer, items: Sequence[Item]) -> list[Change | None]:
    """Outputs of ``materializer`` for the changes of ``items`` (clock items advance it)."""
    result: list[Change | None] = []
    for item in items:
        if isinstance(item, int):
            materializer.advance_time(item)
        else:
            result.append(materializer.process(item))
    return result


def ttl_of(domain: TimeDomain) -> TtlSettings:
    return TtlSettings(ttl_ms=TTL_MS, time_domain=domain)


def build(name: str, keys: Keys, ttl: TtlSettings) -> Materializer:
    return make(name, keys, replace(SMALL_THRESHOLDS, ttl=ttl))


CASES = [(domain, keys) for domain in TimeDomain for keys in (NO_UPSERT_KEY, UPSERT_KEY)]
CASE_IDS = [f"{domain.value}-{'uk' if keys.has_upsert_key else 'no-uk'}" for domain, keys in CASES]


@pytest.fixture(scope="module", params=CASES, ids=CASE_IDS)
def ttl_savepoints(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TimeDomain, Keys, dict[str, Path]]]:
    """A savepoint of every implementation after the first CUT items, TTL on."""
    domain, keys = request.param
    ttl = ttl_of(domain)
    items = timed_stream(SEED, keys, domain)
    root = tmp_path_factory.mktemp("ttl-savepoints")
    paths: dict[str, Path] = {}
    for name in IMPLEMENTATIONS:
        source = build(name, keys, ttl)
        try:
            expected = run(ModelMaterializer(keys, ttl, granularity_of(name)), items[:CUT])
            assert run(source, items[:CUT]) == expected, name
            paths[name] = root / name.replace("/", "-")
            save_savepoint(paths[name], source, keys=keys, ttl=ttl)
        finally:
            source.close()
    yield domain, keys, paths


def elements(materializer: Materializer | ModelMaterializer) -> dict[bytes, list[tuple[bytes, int]]]:
    """The exported elements, rows canonical, stamps included."""
    assert isinstance(materializer, StateTransfer)
    return {c: [(canonical(row), stamp) for row, stamp in e] for c, e in materializer.export_elements()}


def test_the_stamps_at_the_cut_differ_from_the_clock(
    ttl_savepoints: tuple[TimeDomain, Keys, dict[str, Path]],
) -> None:
    """State at the cut has elements stamped before the clock, so a migration that lost the
    stamps (re-stamping at restore time) would fail the element comparisons below."""
    domain, keys, _ = ttl_savepoints
    items = timed_stream(SEED, keys, domain)
    model = ModelMaterializer(keys, ttl_of(domain), Granularity.PER_ELEMENT)
    run(model, items[:CUT])
    stamps = [stamp for found in elements(model).values() for _, stamp in found]
    assert len(stamps) >= 5 and sum(stamp < model.now for stamp in stamps) >= 5, (stamps, model.now)


@pytest.mark.parametrize("target", PER_ELEMENT)
def test_per_element_savepoints_restore_into_every_per_element_implementation(
    ttl_savepoints: tuple[TimeDomain, Keys, dict[str, Path]], target: str
) -> None:
    """Every per-element source -> ``target``: output equals the model over the whole stream."""
    domain, keys, paths = ttl_savepoints
    ttl = ttl_of(domain)
    items = timed_stream(SEED, keys, domain)
    model = ModelMaterializer(keys, ttl, Granularity.PER_ELEMENT)
    run(model, items[:CUT])
    at_cut = elements(model)
    expected = run(model, items[CUT:])
    for source in PER_ELEMENT:
        restored = build(target, keys, ttl)
        try:
            load_savepoint(paths[source], restored, keys=keys, ttl=ttl)
            assert elements(restored) == at_cut, f"{source} -> {target}: stamps at the cut"
            assert run(restored, items[CUT:]) == expected, f"{source} -> {target}"
            assert elements(restored) == elements(model), f"{source} -> {target}: stamps"
        finally:
            restored.close()


def _changes(items: Sequence[Item]) -> list[Change]:
    return [item for item in items if not isinstance(item, int)]


def _imported_model(
    keys: Keys, ttl: TtlSettings, source: Granularity, target: Granularity, items: Sequence[Item]
) -> ModelMaterializer:
    """A ``target`` model that imported a ``source`` model's elements after ``items``."""
    before = ModelMaterializer(keys, ttl, source)
    run(before, items)
    after = ModelMaterializer(keys, ttl, target)
    after.import_elements(before.export_elements(), before.now)
    return after


@pytest.mark.parametrize(
    ("sources", "targets"),
    [(PER_KEY, PER_ELEMENT), (PER_ELEMENT, PER_KEY)],
    ids=["per-key-to-element", "element-to-per-key"],
)
def test_across_granularities_equals_the_model_imported_the_same_way(
    ttl_savepoints: tuple[TimeDomain, Keys, dict[str, Path]], sources: list[str], targets: list[str]
) -> None:
    domain, keys, paths = ttl_savepoints
    ttl = ttl_of(domain)
    items = timed_stream(SEED, keys, domain)
    source_granularity, target_granularity = granularity_of(sources[0]), granularity_of(targets[0])
    model = _imported_model(keys, ttl, source_granularity, target_granularity, items[:CUT])
    at_cut = elements(model)
    expected = run(model, items[CUT:])
    for source in sources:
        for target in targets:
            restored = build(target, keys, ttl)
            try:
                load_savepoint(paths[source], restored, keys=keys, ttl=ttl)
                assert elements(restored) == at_cut, f"{source} -> {target}: stamps at the cut"
                assert run(restored, items[CUT:]) == expected, f"{source} -> {target}"
                assert elements(restored) == elements(model), f"{source} -> {target}: stamps"
            finally:
                restored.close()


# -- why a granularity change cannot equal an uninterrupted run ------------------------------

TEN = TtlSettings(ttl_ms=10)
KEYS = NO_UPSERT_KEY


def _add(value: str) -> Change:
    return Change(RowKind.INSERT, (1, value))


def _delete(value: str) -> Change:
    return Change(RowKind.DELETE, (1, value))


def _migrated(
    source: Granularity, target: Granularity, before: list[Item], after: list[Item]
) -> list[Change | None]:
    model = _imported_model(KEYS, TEN, source, target, before)
    return run(model, after)


def test_per_key_to_per_element_differs_from_an_uninterrupted_per_key_run() -> None:
    """``a``@0, ``b``@5 (key stamp 5), migrate at 6; ``c``@12; at 16 ``-D c``.

    Per key, ``c`` re-stamped the whole key (12), so ``b`` is still there: ``+U b``. After the
    migration ``a`` and ``b`` carry the key's stamp 5 and age on their own: gone at 15, so
    ``-D c`` empties the key. The per-key lifetime of ``a`` and ``b`` depended on *future*
    writes to the key, which a per-element element cannot know.
    """
    before: list[Item] = [_add("a"), 5, _add("b"), 6]
    after: list[Item] = [12, _add("c"), 16, _delete("c")]
    uninterrupted = run(ModelMaterializer(KEYS, TEN, Granularity.PER_KEY), [*before, *after])
    migrated = _migrated(Granularity.PER_KEY, Granularity.PER_ELEMENT, before, after)
    assert uninterrupted[-1] == Change(RowKind.UPDATE_AFTER, (1, "b"))
    assert migrated[-1] == Change(RowKind.DELETE, (1, "c"))


def test_per_element_to_per_key_differs_from_an_uninterrupted_per_element_run() -> None:
    """``a``@0, ``b``@5, migrate at 6 (key stamp = the greatest, 5); at 12 ``-D b``.

    Per element ``a`` expired at 10, so ``-D b`` empties the key. Per key the whole history
    lives until 15, so ``a`` is still there: ``+U a``. One stamp cannot hold two lifetimes.
    """
    before: list[Item] = [_add("a"), 5, _add("b"), 6]
    after: list[Item] = [12, _delete("b")]
    uninterrupted = run(ModelMaterializer(KEYS, TEN, Granularity.PER_ELEMENT), [*before, *after])
    migrated = _migrated(Granularity.PER_ELEMENT, Granularity.PER_KEY, before, after)
    assert uninterrupted[-1] == Change(RowKind.DELETE, (1, "b"))
    assert migrated[-1] == Change(RowKind.UPDATE_AFTER, (1, "a"))


# -- through the command line --------------------------------------------------------------


def _cli(*args: str | Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, *map(str, args)],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _lines(items: Sequence[Item]) -> str:
    out = []
    for item in items:
        if isinstance(item, int):
            out.append(json.dumps({"time": item}))
        else:
            out.append(json.dumps({"op": item.kind.value, "row": list(item.row)}))
    return "\n".join(out) + "\n"


def test_cli_restore_migrates_legacy_with_ttl_and_refuses_other_ttl(tmp_path: Path) -> None:
    before: list[Item] = [_add("a"), 5, _add("b"), 6]
    after: list[Item] = [12, _add("c"), 16, _delete("c")]
    (tmp_path / "p1.jsonl").write_text(_lines(before))
    (tmp_path / "p2.jsonl").write_text(_lines(after))
    st, sp, st2 = tmp_path / "st", tmp_path / "sp", tmp_path / "st2"
    common = ("--pk", "0", "--ttl", "10")
    done = _cli(
        "replay",
        *common,
        "--strategy",
        "LEGACY",
        "--backend",
        "rocksdb",
        "--state-dir",
        st,
        tmp_path / "p1.jsonl",
    )
    assert done.returncode == 0, done.stderr
    refused = _cli("savepoint", "--state-dir", st, "-o", sp, "--ttl", "20")
    assert refused.returncode == 3 and "was written with 10 ms" in refused.stderr
    assert _cli("savepoint", "--state-dir", st, "-o", sp).returncode == 0  # TTL from the state dir
    refused = _cli("restore", sp, "--state-dir", st2, "--strategy", "MAP", "--ttl", "5")
    assert refused.returncode == 3 and "taken with TTL 10 ms" in refused.stderr
    restored = _cli("restore", sp, "--state-dir", st2, "--strategy", "MAP", "--backend", "lmdb")
    assert restored.returncode == 0, restored.stderr
    refused = _cli(
        "replay",
        "--pk",
        "0",
        "--strategy",
        "MAP",
        "--backend",
        "lmdb",
        "--state-dir",
        st2,
        tmp_path / "p2.jsonl",
    )
    assert refused.returncode == 3 and "state directory's is 10 ms" in refused.stderr
    done = _cli(
        "replay", *common, "--strategy", "MAP", "--backend", "lmdb", "--state-dir", st2, tmp_path / "p2.jsonl"
    )
    assert done.returncode == 0, done.stderr
    emitted = [json.loads(line) for line in done.stdout.splitlines()]
    expected = _migrated(Granularity.PER_KEY, Granularity.PER_ELEMENT, before, after)
    assert [(e["op"], e["row"]) for e in emitted] == [
        (change.kind.value, list(change.row)) for change in expected if change is not None
    ]
    assert emitted[-1]["op"] == "-D"
