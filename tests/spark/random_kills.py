"""SIGKILL a pipeline run at a random moment: the exactly-once campaigns' one move
(``test_lakehouse_kills.py``: the lakehouse sinks; ``test_state_kills.py``: the bucket state).

``UPSERTMAT_KILLS`` (default 2, what CI runs) is the kills per campaign; the full campaigns of
docs/spark.md run 20.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

from upsertmat.spark import PipelineConfig

from .cluster import kill_tree
from .harness import start_run

KILLS = int(os.environ.get("UPSERTMAT_KILLS", "2"))


def run_until_killed(config: PipelineConfig, workdir: Path, rng: random.Random) -> bool:
    """Run ``config`` in a subprocess and SIGKILL its process tree after 0-2 batch reports plus
    0-2.5 s (so the kill lands anywhere: start-up, a batch, the sink's commit). False if the run
    ended by itself first."""
    process = start_run(config, workdir)
    reports, wanted = 0, rng.choice([0, 1, 1, 2])
    delay = rng.uniform(0.0, 2.5)
    try:
        assert process.stdout is not None
        if wanted:
            for line in process.stdout:
                if line.startswith("{") and "batch_id" in line:
                    json.loads(line)
                    reports += 1
                    if reports >= wanted:
                        break
                if line.startswith('{"done"'):
                    return False
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            time.sleep(0.05)
        return process.poll() is None
    finally:
        kill_tree(process)
