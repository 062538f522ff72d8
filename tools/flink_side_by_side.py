r"""Real Apache Flink 2.3 and upsertmat on the same workload, alternated in one sitting.

Runs, per round, a Flink benchmark script (its ``SinkUpsertMaterializer`` in a PyFlink
MiniCluster, parallelism 1; see that script's docstring for how the operator's own busy time is
isolated) and ``upsertmat bench`` on the FLIP-544 workload (one sink key, 250-byte payload,
upsert key on, 100% retraction), alternating which goes first from round to round so a slow
spell of a shared machine hits both alike; then prints one table per cell: the median ops/ms
of every repetition of every round for each side, and the ratio upsertmat / Flink.

Flink's workload deletes row ``i - (1 + delay) // 2``: its delay 2 holds ~1 live row and its
delay 2000 ~1,000, the histories of ``upsertmat bench --retract-delay 2`` and ``1000``; Flink's
``hashmap`` backend is compared with ``heap``. upsertmat runs at its ``bench`` default commit
interval (1000) unless ``--checkpoint-interval`` says otherwise.

Usage (7-25 minutes for 2 rounds of 3 repetitions on 2 cores, quiet to loaded)::

    python tools/flink_side_by_side.py --flink-python FLINK_VENV/bin/python \\
        --flink-bench PATH/flink_sum_bench.py --upsertmat VENV/bin/upsertmat --output-dir flink-vs

``FLINK_VENV``: a virtualenv with ``apache-flink==2.3.0`` (the ``flink`` extra's pin) and Java
17 on PATH. Writes ``flink-vs/round-N/`` (each side's raw output) and ``flink-vs/summary.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

STRATEGIES = ("LEGACY", "VALUE", "MAP", "ADAPTIVE")
"""Flink 2.3's strategies (SORTED is upsertmat's own; its cells run without a Flink column)."""
HISTORIES = {2: 2, 1000: 2000}
"""upsertmat's retract delay -> Flink's delay holding the same live rows."""
BACKENDS = {"heap": "hashmap", "rocksdb": "rocksdb"}


def flink_argv(args: argparse.Namespace, out: Path) -> list[str]:
    """The Flink benchmark's command line for one round."""
    return [
        args.flink_python,
        args.flink_bench,
        "--strategies",
        ",".join(STRATEGIES),
        "--backends",
        ",".join(BACKENDS.values()),
        "--upsert-key",
        "true",
        "--pcts",
        "100",
        "--delays",
        ",".join(str(delay) for delay in HISTORIES.values()),
        "--reps",
        str(args.reps),
        "--out",
        str(out / "flink"),
    ]


def upsertmat_argv(args: argparse.Namespace, out: Path) -> list[str]:
    """``upsertmat bench``'s command line for one round."""
    argv = [args.upsertmat, "bench", "--workload", "flip544", "--strategy", ",".join([*STRATEGIES, "SORTED"])]
    argv += ["--backend", "heap,rocksdb,lmdb", "--upsert-key", "on", "--retract-percentage", "100"]
    argv += ["--retract-delay", ",".join(str(delay) for delay in HISTORIES), "--repetitions", str(args.reps)]
    argv += [
        "--max-seconds-per-cell",
        "300",
        "--quiet",
        "--format",
        "json",
        "--output-dir",
        str(out / "upsertmat"),
    ]
    if args.checkpoint_interval is not None:
        argv += ["--checkpoint-interval", str(args.checkpoint_interval)]
    return argv


def flink_samples(path: Path) -> dict[tuple[str, str, int], list[float]]:
    """(strategy, upsertmat backend, upsertmat delay) -> Flink's ops/ms of every repetition."""
    flink_delay = {flink: ours for ours, flink in HISTORIES.items()}
    backend = {flink: ours for ours, flink in BACKENDS.items()}
    found: dict[tuple[str, str, int], list[float]] = {}
    for result in json.loads(path.read_text(encoding="utf-8"))["results"]:
        if result.get("retract_delay") not in flink_delay or not result.get("has_upsert_key"):
            continue
        key = (result["strategy"], backend[result["backend"]], flink_delay[result["retract_delay"]])
        runs = [run["ops_per_ms"] for run in result.get("runs", []) if run.get("ops_per_ms")]
        found.setdefault(key, []).extend(runs or [result["ops_per_ms_median"]])
    return found


def upsertmat_samples(document: dict[str, Any]) -> dict[tuple[str, str, int], list[float]]:
    """(strategy, backend, delay) -> upsertmat's ops/ms of every repetition (wall clock)."""
    found: dict[tuple[str, str, int], list[float]] = {}
    for result in document["results"]:
        key = (result["strategy"], result["backend"], result["retract_delay"])
        found.setdefault(key, []).extend(result["wall_throughputs_ops_per_ms"])
    return found


def table(
    flink: dict[tuple[str, str, int], list[float]], ours: dict[tuple[str, str, int], list[float]]
) -> str:
    """The markdown table: per cell Flink's and upsertmat's medians and the ratio."""
    lines = ["| cell | Flink 2.3 | upsertmat | ratio |", "|---|---:|---:|---:|"]
    for key in sorted(ours, key=lambda k: (k[1] != "heap", k[1], k[0], k[2])):
        strategy, backend, delay = key
        mine = statistics.median(ours[key])
        theirs = statistics.median(flink[key]) if flink.get(key) else None
        flink_text = "-" if theirs is None else f"{theirs:,.4g}"
        ratio = "-" if theirs is None else f"{mine / theirs:.2f}"
        lines.append(f"| {strategy} {backend}, history {delay:,} | {flink_text} | {mine:,.4g} | {ratio} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rounds, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--flink-python", required=True, help="python of a venv with apache-flink==2.3.0")
    parser.add_argument("--flink-bench", required=True, help="the Flink benchmark script")
    parser.add_argument(
        "--upsertmat", default="upsertmat", help="the upsertmat executable (default: on PATH)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds (default 2)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per cell and round (default 3)")
    parser.add_argument("--checkpoint-interval", type=int, help="upsertmat's commit interval (default 1000)")
    parser.add_argument("--output-dir", type=Path, default=Path("flink-vs-upsertmat"))
    args = parser.parse_args(argv)
    flink: dict[tuple[str, str, int], list[float]] = {}
    ours: dict[tuple[str, str, int], list[float]] = {}
    for number in range(args.rounds):
        out = args.output_dir / f"round-{number + 1}"
        out.mkdir(parents=True, exist_ok=True)
        sides = ["flink", "upsertmat"] if number % 2 == 0 else ["upsertmat", "flink"]
        for side in sides:
            print(f"round {number + 1}/{args.rounds}: {side}", file=sys.stderr, flush=True)
            if side == "flink":
                subprocess.run(flink_argv(args, out), check=True, cwd=out, stdout=subprocess.DEVNULL)
                for key, values in flink_samples(out / "flink.json").items():
                    flink.setdefault(key, []).extend(values)
            else:
                completed = subprocess.run(
                    upsertmat_argv(args, out), check=True, capture_output=True, text=True
                )
                (out / "upsertmat.json").write_text(completed.stdout, encoding="utf-8")
                for key, values in upsertmat_samples(json.loads(completed.stdout)).items():
                    ours.setdefault(key, []).extend(values)
    summary = {
        "flink": {"|".join(map(str, key)): values for key, values in flink.items()},
        "upsertmat": {"|".join(map(str, key)): values for key, values in ours.items()},
    }
    (args.output_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(table(flink, ours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
