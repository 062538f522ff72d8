"""``upsertmat bench --misses``: the workloads miss exactly as planned, and the report runs."""

from __future__ import annotations

import logging
import subprocess
import sys

from upsertmat.bench.misses import KEYS, MissSpec, measure, workload
from upsertmat.impls import Backend, Strategy
from upsertmat.spec import ModelMaterializer, RowKind


def test_the_workloads_miss_as_planned() -> None:
    spec = MissSpec(records=3_000, keys=50, miss_percentage=40)
    clean, missing = workload(spec, 0), workload(spec, spec.miss_percentage)
    assert len(clean) == len(missing) == spec.records
    for changes, low, high in ((clean, 0, 0), (missing, 0.3, 0.5)):
        model = ModelMaterializer(KEYS)
        for change in changes:
            model.process(change)
        retractions = sum(change.kind is RowKind.UPDATE_BEFORE for change in changes)
        assert low * retractions <= model.retract_misses <= high * retractions


def test_measure_reports_both_workloads_with_explanations_off_and_on() -> None:
    level = logging.getLogger("upsertmat").level
    (result,) = measure([(Strategy.MAP, Backend.HEAP)], MissSpec(records=600, keys=20), repetitions=1)
    assert logging.getLogger("upsertmat").level == level  # its quieting does not outlive it
    assert result["implementation"] == "MAP/heap" and result["misses"] > 0
    assert set(result["seconds"]) == {"clean off", "clean on", "misses off", "misses on"}


def test_the_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "upsertmat", "bench", "--misses", "--strategy", "VALUE",
         "--backend", "heap", "--records", "400", "--keys", "10", "--repetitions", "1", "--quiet"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("| VALUE/heap | ")
