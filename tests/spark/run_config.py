"""``python tests/spark/run_config.py CONFIG.json``: run a saved :class:`PipelineConfig` in a process of
its own, for the tests that SIGKILL a running pipeline (kill campaigns, cluster, lakehouse).

Prints one JSON object per micro-batch (the :class:`BatchProgress` fields) to stdout, flushed,
then a summary line ``{"done": true, ...}`` (with ``driver_cpu``: the driver process's CPU
seconds of each batch's sink step). Exit status 0 on success, 2 on a bad config. A
user runs a job file with ``upsertmat run`` or a config with
:func:`upsertmat.spark.pipeline.run_pipeline`; this is the tests' own entry point.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from upsertmat.spark.config import BatchProgress, PipelineConfig, PipelineConfigError

SCRIPT = Path(__file__).resolve()
"""This file: ``[sys.executable, str(SCRIPT), config]`` starts it."""


def _report(progress: BatchProgress) -> None:
    print(json.dumps(dataclasses.asdict(progress)), flush=True)


def main(argv: list[str] | None = None) -> int:
    """Run the config named by the single argument."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python tests/spark/run_config.py CONFIG.json", file=sys.stderr)
        return 2
    try:
        config = PipelineConfig.from_json(Path(args[0]).read_text()).with_progress(_report)
    except (OSError, PipelineConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    from upsertmat.spark.pipeline import start_pipeline

    run = start_pipeline(config)
    result = run.wait()
    summary = {
        "done": True,
        "batches": len(result.batches),
        "changes": result.changes,
        "seconds": result.seconds,
        "driver_cpu": run.driver_cpu,  # the driver process's CPU seconds of each batch's sink step
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
