r"""Real Apache Flink 2.3 and upsertmat on the same workload, alternated in one sitting.

Runs, per round, ``tools/flink_bench.py`` (Flink's ``SinkUpsertMaterializer`` in a PyFlink
MiniCluster, parallelism 1; its docstring says how the operator's own busy time is isolated)
and ``upsertmat bench`` on the FLIP-544 workload (one sink key, 250-byte payload, 100%
retraction) in both matching modes: with the upsert key (``--upsert-key on``; Flink's
``--upsert-key true``) and matching whole rows (``off``; Flink's ``false``), alternating which
goes first from round to round so a slow spell of a shared machine hits both alike; then prints
one table row per cell: the median ops/ms of every repetition of every round for each side,
and the ratio upsertmat / Flink. ``--upsert-key on`` or ``off`` runs one mode only.

Flink's workload deletes row ``i - (1 + delay) // 2``: its delay 2 holds ~1 live row and its
delay 2000 ~1,000, the histories of ``upsertmat bench --retract-delay 2`` and ``1000``; Flink's
``hashmap`` backend is compared with ``heap``. upsertmat runs at its ``bench`` default commit
interval (1000) unless ``--checkpoint-interval`` says otherwise.

Usage, from a clone, in a virtualenv with the compiled build and the ``flink`` extra
(``pip install '.[flink]'``: PyFlink 2.3.0) and Java 17 on PATH, both sides from that
virtualenv (15-50 minutes for 2 rounds of 3 repetitions of both modes on 2 cores, quiet to
loaded; about half for one mode)::

    python tools/flink_side_by_side.py --output-dir flink-vs

``--flink-python`` (default: this Python) and ``--upsertmat`` (default: ``upsertmat`` on PATH)
put the sides in other virtualenvs; ``--flink-bench`` is another Flink benchmark script taking
``flink_bench.py``'s options. Writes ``flink-vs/round-N/`` (each side's raw output) and
``flink-vs/summary.json``.
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
"""upsertmat's backends Flink has -> Flink's name (LMDB is upsertmat's own)."""
OUR_STRATEGIES = (*STRATEGIES, "SORTED")
OUR_BACKENDS = (*BACKENDS, "lmdb")


def strategy_rank(strategy: str) -> int:
    """The table's order of strategies: Flink's, then SORTED."""
    order = list(OUR_STRATEGIES)
    return order.index(strategy) if strategy in order else len(order)


def choices(allowed: Sequence[str]) -> Any:
    """An argparse type: a comma-separated subset of ``allowed`` (upper or lower case as given)."""

    def parse(text: str) -> tuple[str, ...]:
        found = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
        wrong = [value for value in found if value not in allowed]
        if not found or wrong:
            raise argparse.ArgumentTypeError(f"expected some of {','.join(allowed)}, got {text!r}")
        return found

    return parse


def modes(text: str) -> tuple[str, ...]:
    """``on``, ``off`` or ``on,off`` (argparse type)."""
    found = tuple(dict.fromkeys(part.strip() for part in text.split(",")))
    if not found or any(mode not in ("on", "off") for mode in found):
        raise argparse.ArgumentTypeError(f"expected on, off or on,off, got {text!r}")
    return found


def flink_argv(args: argparse.Namespace, out: Path) -> list[str]:
    """The Flink benchmark's command line for one round."""
    return [
        args.flink_python,
        args.flink_bench,
        "--strategies",
        ",".join(strategy for strategy in args.strategies if strategy in STRATEGIES),
        "--backends",
        ",".join(BACKENDS[backend] for backend in args.backends if backend in BACKENDS),
        "--upsert-key",
        ",".join("true" if mode == "on" else "false" for mode in args.upsert_key),
        "--pcts",
        "100",
        "--delays",
        ",".join(str(delay) for delay in HISTORIES.values()),
        "--reps",
        str(args.reps),
        *(["--records", str(args.records)] if args.records is not None else []),
        "--out",
        str(out / "flink"),
    ]


def upsertmat_argv(args: argparse.Namespace, out: Path) -> list[str]:
    """``upsertmat bench``'s command line for one round."""
    argv = [args.upsertmat, "bench", "--workload", "flip544", "--strategy", ",".join(args.strategies)]
    argv += ["--backend", ",".join(args.backends), "--upsert-key", ",".join(args.upsert_key)]
    argv += ["--retract-percentage", "100"]
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
    if args.records is not None:
        argv += ["--records", str(args.records)]
    return argv


Cell = tuple[str, str, str, int]
"""(strategy, upsertmat backend, upsert key ``on``/``off``, upsertmat delay)."""


def flink_samples(path: Path) -> dict[Cell, list[float]]:
    """Cell -> Flink's ops/ms of every repetition."""
    flink_delay = {flink: ours for ours, flink in HISTORIES.items()}
    backend = {flink: ours for ours, flink in BACKENDS.items()}
    found: dict[Cell, list[float]] = {}
    for result in json.loads(path.read_text(encoding="utf-8"))["results"]:
        if result.get("retract_delay") not in flink_delay:
            continue
        mode = "on" if result.get("has_upsert_key") else "off"
        key = (result["strategy"], backend[result["backend"]], mode, flink_delay[result["retract_delay"]])
        runs = [run["ops_per_ms"] for run in result.get("runs", []) if run.get("ops_per_ms")]
        median = result.get("ops_per_ms_median")
        found.setdefault(key, []).extend(runs or ([median] if median else []))
    return found


def upsertmat_samples(document: dict[str, Any]) -> dict[Cell, list[float]]:
    """Cell -> upsertmat's ops/ms of every repetition (wall clock)."""
    found: dict[Cell, list[float]] = {}
    for result in document["results"]:
        mode = "on" if result["upsert_key"] else "off"
        key = (result["strategy"], result["backend"], mode, result["retract_delay"])
        found.setdefault(key, []).extend(result["wall_throughputs_ops_per_ms"])
    return found


def table(flink: dict[Cell, list[float]], ours: dict[Cell, list[float]]) -> str:
    """The markdown table: per cell Flink's and upsertmat's medians (ops/ms) and the ratio."""
    lines = [
        "| cell | upsert key | Flink 2.3 ops/ms | upsertmat ops/ms | ratio |",
        "|---|---|---:|---:|---:|",
    ]
    for key in sorted(ours, key=lambda k: (k[2] != "on", k[1] != "heap", k[1], strategy_rank(k[0]), k[3])):
        strategy, backend, mode, delay = key
        mine = statistics.median(ours[key])
        theirs = statistics.median(flink[key]) if flink.get(key) else None
        flink_text = "-" if theirs is None else f"{theirs:,.0f}"
        ratio = "-" if theirs is None else f"{mine / theirs:.2f}"
        cell = f"{strategy} {backend}, history {delay:,}"
        lines.append(f"| {cell} | {mode} | {flink_text} | {mine:,.0f} | {ratio} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rounds, print the table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--flink-python",
        default=sys.executable,
        help="python of a venv with apache-flink==2.3.0 (default: this one)",
    )
    parser.add_argument(
        "--flink-bench",
        default=str(Path(__file__).resolve().with_name("flink_bench.py")),
        help="the Flink benchmark script (default: flink_bench.py beside this script)",
    )
    parser.add_argument(
        "--upsertmat", default="upsertmat", help="the upsertmat executable (default: on PATH)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternated rounds (default 2)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per cell and round (default 3)")
    parser.add_argument(
        "--strategies",
        type=choices(OUR_STRATEGIES),
        default=OUR_STRATEGIES,
        help="strategies (default all; SORTED is upsertmat's only)",
    )
    parser.add_argument(
        "--backends",
        type=choices(OUR_BACKENDS),
        default=OUR_BACKENDS,
        help="upsertmat's backends (default heap,rocksdb,lmdb; Flink runs hashmap for heap, and rocksdb)",
    )
    parser.add_argument(
        "--records", type=int, help="records per invocation on both sides (default theirs, 10,000)"
    )
    parser.add_argument("--checkpoint-interval", type=int, help="upsertmat's commit interval (default 1000)")
    parser.add_argument(
        "--upsert-key",
        type=modes,
        default=("on", "off"),
        help="matching modes: on (the upsert key), off (whole rows) or on,off (default)",
    )
    parser.add_argument("--output-dir", type=Path, default=Path("flink-vs-upsertmat"))
    args = parser.parse_args(argv)
    args.output_dir = args.output_dir.resolve()  # the Flink side runs in its round's folder
    flink: dict[Cell, list[float]] = {}
    ours: dict[Cell, list[float]] = {}
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
