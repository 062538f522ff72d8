"""Running the gateway: one process, one Spark session, the API on uvicorn.

:func:`serve` refuses a bind address other than loopback without a token, takes the data root's
lock (one gateway per root), starts Spark on the configured master (its log under
``<root>/logs/``), starts again every job the registry wants running, and serves until SIGINT or
SIGTERM; then every job stops at a micro-batch boundary (they resume when the gateway starts
again), Spark stops, and the exit code is 130 / 143. ``<root>/gateway.json`` names the address
it listens on while it runs (``{"url": ..., "pid": ...}``; port 0 picks a free one).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TextIO

from ..errors import CliError, ExitCode
from .settings import GatewaySettings

EXPIRY_PERIOD_SECONDS = 30.0
ADDRESS_FILE = "gateway.json"


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def check_bind(settings: GatewaySettings) -> None:
    """CliError (usage) for a non-loopback bind without a token."""
    if not settings.loopback and not settings.token:
        raise CliError(
            f"refusing to listen on {settings.host} without a token: set --token or UPSERTMAT_GATEWAY_TOKEN "
            "(every request must then carry it), or listen on 127.0.0.1",
            ExitCode.USAGE,
        )


def lock_root(root: Path) -> TextIO:
    """The data root's lock file, locked (CliError, exit 3, if another gateway holds it)."""
    try:
        root.mkdir(parents=True, exist_ok=True)
        handle = (root / "gateway.lock").open("a+")
    except OSError as error:
        raise CliError(f"cannot use the data root {root}: {error.strerror}", ExitCode.IO) from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise CliError(f"another gateway uses the data root {root}", ExitCode.STATE_DIR) from None
    return handle


def serve(settings: GatewaySettings, log: Callable[[str], None] | None = None) -> int:
    """Run the gateway until a signal; the exit code."""
    import uvicorn

    from ..spark.session import SparkStartError, build_session
    from .app import create_app
    from .service import Gateway

    say = log or (lambda text: print(f"upsertmat gateway: {text}", file=sys.stderr, flush=True))
    check_bind(settings)
    root = settings.root.resolve()
    lock = lock_root(root)
    listener = socket.socket(socket.AF_INET6 if ":" in settings.host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((settings.host, settings.port))
    except OSError as error:
        lock.close()
        raise CliError(
            f"cannot listen on {settings.host}:{settings.port}: {error.strerror}", ExitCode.IO
        ) from None
    port = int(listener.getsockname()[1])
    say(f"starting Spark ({settings.master}) ...")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    try:
        spark = build_session(
            master=settings.master, log_file=root / "logs" / f"spark-{stamp}-{os.getpid()}.log"
        )
    except SparkStartError as error:
        lock.close()
        raise CliError(str(error), ExitCode.USAGE if error.usage else ExitCode.IO) from None
    gateway = Gateway(settings, spark, say)
    resumed = gateway.resume()
    if resumed:
        say(f"resumed {len(resumed)} jobs on their checkpoints: {', '.join(resumed)}")
    app = create_app(gateway, say)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_keep_alive=5)
    server = uvicorn.Server(config)
    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{port}"
    address = root / ADDRESS_FILE
    address.write_text(json.dumps({"url": url, "pid": os.getpid()}) + "\n")
    stop_expiry = threading.Event()
    threading.Thread(target=_expire, args=(gateway, stop_expiry), daemon=True).start()
    say(f"listening on {url} (data root {root}; status page {url}/)")

    def exit_with(number: int, frame: FrameType | None) -> None:
        raise _Exit(128 + number)

    # uvicorn restores these after its own shutdown and raises the signal it caught again.
    signal.signal(signal.SIGINT, exit_with)
    signal.signal(signal.SIGTERM, exit_with)
    code = int(ExitCode.OK)
    try:
        server.run(sockets=[listener])
    except _Exit as stop:
        code = stop.code
    finally:
        stop_expiry.set()
        say("stopping: every job stops at a micro-batch boundary and resumes when the gateway starts again")
        gateway.shutdown()
        spark.stop()
        address.unlink(missing_ok=True)
        lock.close()
    return code


def _expire(gateway: object, stop: threading.Event) -> None:
    from .service import Gateway

    assert isinstance(gateway, Gateway)
    while not stop.wait(EXPIRY_PERIOD_SECONDS):
        try:
            gateway.expire()
        except Exception as error:  # keep expiring later; the registry may be closing
            gateway.log(f"expiry failed: {error}")
