"""What rule-7 explanations cost: ``upsertmat bench --misses``.

The workload: ``keys`` sink keys visited round robin; each visit retracts the key's current row
(``-U``) and adds its next version (``+U``; ``+I`` on the first visit), so every retraction has a
live row to match. With ``miss_percentage`` > 0, that share of the retractions carries the
row's ``token`` column recomputed (a new value, as ``UUID()`` would give): it matches nothing,
and the stored row stays (the stale row of docs/spec.md, rule 7). Seeded, so every run of one
spec is the same.

Each implementation runs the clean workload (0 % misses) and the miss workload with
explanations off (``upsertmat.misses.max-rows`` 0) and on (the default), the two settings
alternated in each repetition; each run is timed in CPU time of this process (a shared
machine's other work does not count); reported are the medians, their ratio and the extra
CPU time per miss. Byte backends commit every 1,000 inputs
(``replay --state-dir``'s default), in temporary directories.
"""

from __future__ import annotations

import gc
import logging
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..impls import Backend, Settings, Strategy, create
from ..impls.settings import DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_MISS_ROWS
from ..spec import Change, Keys, RowKind, process_many

KEYS = Keys(pk=(0,))  # rows (key, version, token): whole-row matching, as without an upsert key
CHUNK = 1024


@dataclass(frozen=True)
class MissSpec:
    """The workload's parameters (module docstring)."""

    records: int = 20_000
    keys: int = 1_000
    miss_percentage: int = 50
    seed: int = 0


def workload(spec: MissSpec, miss_percentage: int) -> list[Change]:
    """The changes of ``spec`` with ``miss_percentage`` % of the retractions recomputed."""
    rng = random.Random(f"upsertmat-bench-misses:{spec.seed}:{miss_percentage}")
    current: dict[int, tuple[int, int, str]] = {}
    changes: list[Change] = []
    step = 0
    while len(changes) < spec.records:
        key = step % spec.keys
        row = (key, step, f"{rng.getrandbits(64):016x}")
        old = current.get(key)
        if old is None:
            changes.append(Change(RowKind.INSERT, row))
        else:
            if rng.random() * 100 < miss_percentage:
                old = (old[0], old[1], f"{rng.getrandbits(64):016x}")  # the token, computed again
            changes.append(Change(RowKind.UPDATE_BEFORE, old))
            changes.append(Change(RowKind.UPDATE_AFTER, row))
        current[key] = row
        step += 1
    return changes[: spec.records]


def timed_run(
    strategy: Strategy, backend: Backend, changes: list[Change], miss_rows: int
) -> tuple[float, int]:
    """(CPU seconds of this process, misses) of one fresh materializer through ``changes``:
    CPU time, not wall time, so that other processes on a shared machine do not count."""
    with tempfile.TemporaryDirectory(prefix="upsertmat-bench-misses-") as tmp:
        settings = Settings(
            strategy=strategy,
            backend=backend,
            state_dir=None if backend is Backend.HEAP else Path(tmp),
            checkpoint_interval=DEFAULT_CHECKPOINT_INTERVAL,
            miss_rows=miss_rows,
        )
        materializer = create(KEYS, settings)
        try:
            gc.collect()
            start = time.process_time_ns()
            for begin in range(0, len(changes), CHUNK):
                process_many(materializer, changes[begin : begin + CHUNK])
            commit = getattr(materializer, "commit", None)
            if commit is not None:
                commit()
            seconds = (time.process_time_ns() - start) / 1e9
            misses = materializer.retract_misses
        finally:
            materializer.close()
    return seconds, misses


def measure(
    pairs: Sequence[tuple[Strategy, Backend]], spec: MissSpec, repetitions: int, quiet: bool = True
) -> list[dict[str, Any]]:
    """Per implementation: median seconds clean and with misses, explanations off and on."""
    logger = logging.getLogger("upsertmat")
    level = logger.level
    logger.setLevel(logging.ERROR)  # the per-miss warnings are not what is measured
    try:
        return _measure(pairs, spec, repetitions, quiet)
    finally:
        logger.setLevel(level)


def _measure(
    pairs: Sequence[tuple[Strategy, Backend]], spec: MissSpec, repetitions: int, quiet: bool
) -> list[dict[str, Any]]:
    clean, missing = workload(spec, 0), workload(spec, spec.miss_percentage)
    results = []
    for strategy, backend in pairs:
        times: dict[str, list[float]] = {"clean off": [], "clean on": [], "misses off": [], "misses on": []}
        misses = 0
        for repetition in range(repetitions):
            order = [(0, "off"), (DEFAULT_MISS_ROWS, "on")]
            if repetition % 2:
                order.reverse()  # alternate which setting runs first
            for rows, label in order:
                times[f"clean {label}"].append(timed_run(strategy, backend, clean, rows)[0])
                seconds, misses = timed_run(strategy, backend, missing, rows)
                times[f"misses {label}"].append(seconds)
        medians = {name: statistics.median(values) for name, values in times.items()}
        results.append(
            {
                "implementation": f"{strategy.value}/{backend.value}",
                "records": spec.records,
                "misses": misses,
                "seconds": medians,
                "clean_ratio": medians["clean on"] / medians["clean off"],
                "misses_ratio": medians["misses on"] / medians["misses off"],
                "us_per_miss": (medians["misses on"] - medians["misses off"]) / max(misses, 1) * 1e6,
            }
        )
        if not quiet:
            print(
                f"upsertmat bench --misses: {results[-1]['implementation']} done", file=sys.stderr, flush=True
            )
    return results


def table(results: Sequence[dict[str, Any]]) -> str:
    """A Markdown table of :func:`measure`'s results (throughput in inputs per ms)."""
    lines = [
        "| implementation | clean, off | clean, on | time on/off | misses, off | misses, on | time on/off "
        "| µs per miss |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        rate = {name: result["records"] / seconds / 1000 for name, seconds in result["seconds"].items()}
        lines.append(
            f"| {result['implementation']} | {rate['clean off']:.0f} | {rate['clean on']:.0f} | "
            f"{result['clean_ratio']:.2f} | {rate['misses off']:.0f} | {rate['misses on']:.0f} | "
            f"{result['misses_ratio']:.2f} | {result['us_per_miss']:.1f} |"
        )
    return "\n".join(lines)
