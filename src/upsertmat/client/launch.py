"""Start ``upsertmat gateway`` as a child process and wait until it listens.

The benchmark of the gateway, the soak tool and the tests start the same command: this
interpreter's ``python -m upsertmat gateway --data-root ROOT --port 0 --trigger-interval T``
on 127.0.0.1, then poll ``<ROOT>/gateway.json``, which the gateway writes (aside, then renamed
in) once its socket listens. The caller owns the process and stops it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from .http import ADDRESS_FILE, BadAddress, address_of


class GatewayStartError(RuntimeError):
    """The gateway exited, or did not listen in time; the message carries its stderr if kept."""


def start_gateway(
    root: Path,
    *,
    trigger_interval: str = "500 ms",
    extra: Sequence[str] = (),
    stderr: Path | None = None,
    timeout: float = 300.0,
    env: Mapping[str, str] | None = None,
) -> tuple[subprocess.Popen[bytes], str]:
    """(the process, its URL) of a gateway on ``root`` in a session of its own (so its JVM can be
    signalled with it). ``extra``: more command-line arguments; ``stderr``: a file that receives
    its stderr (else discarded); ``env``: variables set over this process's environment. An old
    ``gateway.json`` is removed first, so the URL returned is the new process's.
    GatewayStartError if it exits or does not listen within ``timeout`` seconds (the process is
    killed then)."""
    (root / ADDRESS_FILE).unlink(missing_ok=True)
    command = [
        sys.executable,
        "-m",
        "upsertmat",
        "gateway",
        "--data-root",
        str(root),
        "--port",
        "0",
        "--trigger-interval",
        trigger_interval,
        *extra,
    ]
    log: IO[bytes] | int = subprocess.DEVNULL if stderr is None else stderr.open("wb")
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            env=None if env is None else {**os.environ, **env},
        )
    finally:
        if not isinstance(log, int):
            log.close()  # the child holds its own descriptor

    def kept() -> str:
        return "" if stderr is None else ": " + stderr.read_text(errors="replace").strip()

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise GatewayStartError(f"the gateway exited with {process.returncode}{kept()}")
        try:
            return process, address_of(root)
        except BadAddress:
            time.sleep(0.2)
    process.kill()
    process.wait()
    raise GatewayStartError(f"the gateway did not listen within {timeout:g} s{kept()}")
