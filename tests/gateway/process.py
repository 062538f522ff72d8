"""A real ``upsertmat gateway`` process for the tests, and the demo workload split into files.

:class:`GatewayProcess` starts the command (its own JVM) on 127.0.0.1 with port 0, waits for
``<root>/gateway.json`` to name its address, and can be SIGKILLed and started again on the same
data root; on exit it stops what it started (SIGTERM, then SIGKILL after a grace time).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from upsertmat.client.launch import start_gateway
from upsertmat.demo.workload import DemoChange

from ..spark.cluster import kill_tree, stop_tree


class GatewayProcess:
    """``upsertmat gateway --data-root ROOT --port 0 ...`` as a subprocess."""

    def __init__(
        self,
        root: Path,
        extra: Sequence[str] = (),
        token: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = root
        self.extra = list(extra)
        self.token = token
        self.env = env
        self.process: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.starts = 0

    def start(self, timeout: float = 180.0) -> str:
        """Start it and wait until it listens; its URL."""
        extra = [*self.extra, *(["--token", self.token] if self.token else [])]
        self.starts += 1
        self.process, self.url = start_gateway(
            self.root,
            trigger_interval="300 ms",
            extra=extra,
            stderr=self._log(),
            timeout=timeout,
            env=self.env,
        )
        return self.url

    def _log(self) -> Path:
        return self.root.parent / f"gateway-{self.root.name}-{self.starts}.err"

    def stderr(self) -> str:
        path = self._log()
        return path.read_text(errors="replace") if path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the gateway and its JVM (which runs in a session of its own), and wait until
        both are gone."""
        assert self.process is not None
        kill_tree(self.process)

    def terminate(self, grace: float = 90.0) -> int:
        """SIGTERM and wait; the exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            stop_tree(self.process)
            raise

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            stop_tree(self.process)


def records(changes: Sequence[DemoChange], first_seq: int = 0) -> list[dict[str, Any]]:
    """The demo's changes as source records with their arrival order ``seq``."""
    return [
        {
            "seq": first_seq + index,
            "op": change.op,
            "id": change.id,
            "level": change.level,
            "badge": change.badge,
        }
        for index, change in enumerate(changes)
    ]


def drop_file(directory: Path, name: str, rows: Sequence[dict[str, Any]]) -> None:
    """Write a JSON Lines file aside and rename it into ``directory`` (Spark sees it whole), with an
    increasing modification time (Spark takes files in that order)."""
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory.parent / f".{name}.partial"
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    stamp = time.time()
    for existing in directory.iterdir():
        stamp = max(stamp, existing.stat().st_mtime + 1)
    os.utime(partial, (stamp, stamp))
    os.replace(partial, directory / name)


def replay(changes: Sequence[dict[str, Any]], pk: int = 0) -> dict[Any, tuple[Any, ...]]:
    """The table a changelog of ``{"op", "row"}`` changes leaves (``+I``/``+U`` set, ``-U``/``-D``
    remove the key)."""
    table: dict[Any, tuple[Any, ...]] = {}
    for change in changes:
        row = tuple(change["row"])
        if change["op"] in ("+I", "+U"):
            table[row[pk]] = row
        else:
            table.pop(row[pk], None)
    return table
