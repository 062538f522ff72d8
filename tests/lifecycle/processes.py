"""Run ``upsertmat`` commands to the end, or SIGKILL them part-way (crash-recovery tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


def run_to_end(args: list[str]) -> None:
    """Run ``args``; it must exit 0."""
    result = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


def run_and_kill(args: list[str], output: Path, at_bytes: int) -> bool:
    """Start ``args``; SIGKILL it once ``output`` reaches ``at_bytes``. True if it was killed
    (False: it finished first, and then it must have exited 0)."""
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if output.exists() and output.stat().st_size >= at_bytes:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            return True
        time.sleep(0.0005)
    assert process.stderr is not None
    stderr = process.stderr.read().decode()
    process.wait()
    assert process.returncode == 0, stderr
    return False
