"""Where a Paimon batch is written: the executors (the default) against the driver (docs/spark.md,
*Where a batch is written*).

``python tools/paimon_write_bench.py --batches 5 --changes 50000 --keys 100000`` writes a changelog
of ``--batches`` JSON Lines files of ``--changes`` changes each (every key inserted, then updates
as ``-U``/``+U`` pairs and a tenth deletes), and runs the pipeline (``key_buckets`` 256, one file
per micro-batch) into a new Paimon table twice, each in a driver process of its own on
``--master`` (default ``local[2]``): with the executors writing the data files, then with
``UPSERTMAT_SINK_WRITE=driver`` (the batch collected to the driver, which writes). Per run it prints
one JSON object: per batch the driver process's CPU seconds of the sink step
(``PipelineRun.driver_cpu``) and the batch's sink time (``BatchProgress.sink_seconds``: running the
batch's stages, since Spark is lazy, plus the write and commit), their medians without the first
batch (it also starts the query), that the two tables are equal, and the load average after it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def write_changelog(directory: Path, batches: int, changes: int, keys: int, seed: int) -> None:
    """``batches`` files of ``changes`` changes each, modification times 1 s apart."""
    rng = random.Random(seed)
    current: dict[int, int] = {}
    seq = 0
    directory.mkdir(parents=True, exist_ok=True)
    start = 1_700_000_000
    for number in range(batches):
        lines: list[str] = []
        while len(lines) < changes:
            key = rng.randrange(keys)
            seq += 1

            def line(op: str, version: int, key: int = key, seq: int = seq) -> str:
                record = {"seq": seq, "op": op, "id": key, "version": version, "payload": f"p{version}"}
                return json.dumps(record)

            if key not in current:
                lines.append(line("+I", seq))
                current[key] = seq
            elif rng.random() < 0.1:
                lines.append(line("-D", current.pop(key)))
            else:
                lines += [line("-U", current[key]), line("+U", seq)]
                current[key] = seq
        path = directory / f"part-{number:04d}.json"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.utime(path, (start + number, start + number))


DRIVER = """
import json, sys
from upsertmat.spark import PipelineConfig
from upsertmat.spark.pipeline import start_pipeline
config = PipelineConfig.from_json(open(sys.argv[1]).read())
run = start_pipeline(config)
result = run.wait()
print(json.dumps({"cpu": run.driver_cpu, "sink_seconds": [b.sink_seconds for b in result.batches],
                  "changes": [b.changes for b in result.batches]}))
"""


def run(directory: Path, name: str, source: Path, master: str, driver_path: bool) -> dict[str, Any]:
    """One pipeline run into the Paimon table ``name`` in a driver process of its own: its
    per-batch driver CPU, sink seconds and changes."""
    from upsertmat.spark import PipelineConfig
    from upsertmat.spark.parts import Column, SinkSpec, SourceSpec, SparkOptions
    from upsertmat.spark.sources.formats import SourceFormat

    columns = (Column("id", "long"), Column("version", "long"), Column("payload", "string"))
    config = PipelineConfig(
        source=SourceSpec(source, SourceFormat.JSONL, columns),
        sink=SinkSpec(f"paimon:///{directory / f'warehouse-{name}'}", "bench"),
        primary_key=("id",),
        checkpoint=directory / f"checkpoint-{name}",
        spark=SparkOptions(master=master, max_files_per_trigger=1, key_buckets=256),
    )
    path = directory / f"config-{name}.json"
    path.write_text(config.to_json())
    env = {**os.environ}
    if driver_path:
        env["UPSERTMAT_SINK_WRITE"] = "driver"
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, str(path)], capture_output=True, text=True, env=env, check=True
    )
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def main() -> int:
    """Write the changelog, run it both ways, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=5)
    parser.add_argument("--changes", type=int, default=50_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--first", choices=("executors", "driver"), default="executors", help="the run made first"
    )
    args = parser.parse_args()
    from upsertmat.sinks import paimon

    with tempfile.TemporaryDirectory(prefix="paimon-write-") as temporary:
        directory = Path(temporary)
        write_changelog(directory / "in", args.batches, args.changes, args.keys, args.seed)
        tables = {}
        runs = [("executors", False), ("driver", True)]
        for name, driver_path in runs if args.first == "executors" else runs[::-1]:
            figures = run(directory, name, directory / "in", args.master, driver_path)
            later_cpu, later_sink = figures["cpu"][1:] or figures["cpu"], figures["sink_seconds"][1:]
            url = f"paimon:///{directory / f'warehouse-{name}'}"
            tables[name] = paimon.PaimonKind().snapshot(url, "bench", [])
            print(
                json.dumps(
                    {
                        "write": name,
                        "master": args.master,
                        "changes_per_batch": figures["changes"],
                        "driver_cpu_s": [round(value, 3) for value in figures["cpu"]],
                        "sink_s": [round(value, 3) for value in figures["sink_seconds"]],
                        "median_driver_cpu_s": round(statistics.median(later_cpu), 3),
                        "median_sink_s": round(statistics.median(later_sink or figures["sink_seconds"]), 3),
                        "load": os.getloadavg(),
                    }
                ),
                flush=True,
            )
        executors, driver = tables["executors"], tables["driver"]
        same = executors.rows == driver.rows and executors.total == driver.total
        print(json.dumps({"tables_equal": same, "rows": tables["executors"].total}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
