"""Running the gateway: one process, one Spark session, the API on uvicorn.

:func:`serve` refuses a bind address other than loopback without a token (and TLS), and TLS
material that cannot be used (:mod:`.tls`), before anything starts; then it takes the data root's
lock (one gateway per root), starts Spark on the configured master (its log under
``<root>/logs/``), starts again every job the registry wants running, and serves until SIGINT or
SIGTERM; then every job stops at a micro-batch boundary (they resume when the gateway starts
again), Spark stops, and the exit code is 130 / 143. ``<root>/gateway.json`` names the address
it listens on while it runs (``{"url": ..., "pid": ...}``; port 0 picks a free one).
"""

from __future__ import annotations

import contextlib
import gc
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
from typing import Any

from ..errors import CliError, ExitCode
from ..impls.state.errors import StateError, StateLockedError
from ..impls.state.locking import DirectoryLock
from .settings import GatewaySettings
from .tls import PlainHttpNotice, check_tls, notice_plain_http

EXPIRY_PERIOD_SECONDS = 30.0
COLLECT_PERIOD_SECONDS = 10.0
"""How often the gateway runs Python's full garbage collection: the py4j proxies of each
micro-batch (the DataFrame ``foreachBatch`` hands over, with its query execution and SQL metrics
on the JVM side) sit in reference cycles that only the cyclic collector frees, and the JVM keeps
what a proxy names until Python frees it. A long-lived process seldom runs the collector's oldest
generation, so without this the driver JVM grew by every batch's plan (docs/gateway.md, Memory)."""
JVM_COLLECT_PERIOD_SECONDS = 60.0
"""How often the gateway asks the driver JVM for a full collection (``System.gc()``; with the
serial collector the gateway runs, a stop-the-world pass over a ~100 MB live heap). Without it
the JVM fills its old generation with each batch's short-lived plans before it collects, and its
resident size rises with the pages it touches: measured over 10 minutes of the soak, +24 % after
warm-up without, +13 % with a full collection a minute (docs/gateway.md, Memory)."""
ADDRESS_FILE = "gateway.json"
# The driver JVM's bounds (docs/gateway.md, "Memory"): a heap cap, so the JVM collects instead of
# growing towards a quarter of the machine, and short histories in Spark's status store, which
# otherwise keeps the last 1,000 jobs, stages and SQL executions of every micro-batch.
JVM_BOUNDS = {
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "1000",
    "spark.sql.ui.retainedExecutions": "20",
    "spark.ui.retainedDeadExecutors": "10",
    "spark.sql.streaming.ui.retainedQueries": "20",
    "spark.sql.streaming.ui.retainedProgressUpdates": "20",
    "spark.sql.streaming.numRecentProgressUpdates": "20",
}


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def check_bind(settings: GatewaySettings) -> None:
    """CliError (usage) for a non-loopback bind without a token, or without TLS (unless
    ``plain_http`` says a proxy in front terminates it): the token must not travel in clear."""
    if settings.loopback:
        return
    if not settings.token:
        raise CliError(
            f"refusing to listen on {settings.host} without a token: set --token or UPSERTMAT_GATEWAY_TOKEN "
            "(every request must then carry it), or listen on 127.0.0.1",
            ExitCode.USAGE,
        )
    if not settings.tls and not settings.plain_http:
        raise CliError(
            f"refusing to listen on {settings.host} without TLS (the token would travel in clear text): "
            "give --tls-certfile and --tls-keyfile, or --plain-http behind a proxy that terminates TLS",
            ExitCode.USAGE,
        )


LOCK_NAME = "gateway.lock"


def lock_root(root: Path) -> DirectoryLock:
    """The data root's lock (:class:`~upsertmat.impls.state.locking.DirectoryLock` on
    ``gateway.lock``, the one file lock of upsertmat), held until released: CliError, exit 3,
    if another gateway holds it; exit 4 if the root cannot be used."""
    try:
        return DirectoryLock(root, LOCK_NAME, what="the data root")
    except StateLockedError:
        raise CliError(f"another gateway uses the data root {root}", ExitCode.STATE_DIR) from None
    except StateError as error:
        raise CliError(str(error), ExitCode.IO) from None


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (port 0: a free one), not listening yet; CliError
    (exit 4) if the address cannot be had."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
    except OSError as error:
        listener.close()
        raise CliError(f"cannot listen on {host}:{port}: {error.strerror}", ExitCode.IO) from None
    return listener


def url_of(host: str, port: int, tls: bool) -> str:
    """``http[s]://HOST:PORT`` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}"


def write_address(root: Path, url: str) -> Path:
    """``<root>/gateway.json`` = ``{"url": ..., "pid": ...}``, written aside and renamed in, so a
    reader never sees half a file. Its path."""
    address = root / ADDRESS_FILE
    partial = root / f".{ADDRESS_FILE}.partial"
    partial.write_text(json.dumps({"url": url, "pid": os.getpid()}) + "\n")
    os.replace(partial, address)
    return address


class HttpServer:
    """uvicorn on an already bound socket that announces itself only once it accepts.

    ``announce()`` is called after uvicorn's start-up has created the listening server on the
    socket (asyncio's ``create_server`` calls ``listen()`` and starts accepting before it
    returns), so a client that connects the instant the address file appears is served, never
    refused. :meth:`run` blocks until :meth:`stop` (or a signal, in the main thread). With TLS,
    plain HTTP reaching the port is logged through ``log`` (:class:`.tls.PlainHttpNotice`).
    """

    def __init__(
        self,
        app: Any,
        listener: socket.socket,
        announce: Callable[[], None],
        tls_certfile: Path | None = None,
        tls_keyfile: Path | None = None,
        log: Callable[[str], None] | None = None,
    ) -> None:
        import uvicorn

        self.listener = listener
        notice = PlainHttpNotice(log or (lambda text: print(text, file=sys.stderr, flush=True)))

        class Noticing(uvicorn.Config):
            def load(self) -> None:
                super().load()
                if self.ssl is not None:  # plain HTTP on the TLS port gets a line in the log
                    notice_plain_http(self.ssl, notice)

        config = Noticing(
            app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_keep_alive=5,
            ssl_certfile=None if tls_certfile is None else str(tls_certfile),
            ssl_keyfile=None if tls_keyfile is None else str(tls_keyfile),
        )
        outer = self

        class Announcing(uvicorn.Server):
            async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                await super().startup(sockets=sockets)
                if self.started and not self.should_exit:
                    outer.announced = True
                    announce()

        self.announced = False
        self.server = Announcing(config)

    def run(self) -> None:
        self.server.run(sockets=[self.listener])

    def stop(self) -> None:
        self.server.should_exit = True


def serve(settings: GatewaySettings, log: Callable[[str], None] | None = None) -> int:
    """Run the gateway until a signal; the exit code."""
    from ..spark.session import SparkStartError, build_session
    from .app import create_app
    from .malloc import GATEWAY_ARENAS, limit_arenas
    from .service import Gateway

    say = log or (lambda text: print(f"upsertmat gateway: {text}", file=sys.stderr, flush=True))
    # Before the gateway starts its threads (malloc.py).
    limit_arenas(GATEWAY_ARENAS)
    check_bind(settings)
    if settings.tls_certfile is not None and settings.tls_keyfile is not None:
        check_tls(settings.tls_certfile, settings.tls_keyfile)  # before the root, the lock and Spark
    root = settings.root.resolve()
    lock = lock_root(root)
    (root / ADDRESS_FILE).unlink(missing_ok=True)  # a killed gateway's: not an address any more
    try:
        listener = bind(settings.host, settings.port)
    except CliError:
        lock.release()
        raise
    port = int(listener.getsockname()[1])
    say(f"starting Spark ({settings.master}) ...")
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    try:
        spark = build_session(
            master=settings.master,
            log_file=root / "logs" / f"spark-{stamp}-{os.getpid()}.log",
            conf={**JVM_BOUNDS, "spark.driver.memory": settings.driver_memory, **settings.spark_conf},
        )
    except SparkStartError as error:
        lock.release()
        raise CliError(str(error), ExitCode.USAGE if error.usage else ExitCode.IO) from None
    gateway = Gateway(settings, spark, say)
    resumed = gateway.resume()
    if resumed:
        say(resumed_line(resumed))
    url = url_of(settings.host, port, settings.tls)
    stop_expiry = threading.Event()
    threading.Thread(target=_expire, args=(gateway, stop_expiry), daemon=True).start()
    threading.Thread(
        target=_collect, args=(stop_expiry, spark), daemon=True, name="upsertmat-collect"
    ).start()

    def announce() -> None:
        write_address(root, url)
        say(f"listening on {url} (data root {root}; status page {url}/)")

    app = create_app(gateway, say)
    http = HttpServer(app, listener, announce, settings.tls_certfile, settings.tls_keyfile, say)

    def exit_with(number: int, frame: FrameType | None) -> None:
        raise _Exit(128 + number)

    # uvicorn restores these after its own shutdown and raises the signal it caught again.
    signal.signal(signal.SIGINT, exit_with)
    signal.signal(signal.SIGTERM, exit_with)
    code = int(ExitCode.OK)
    try:
        http.run()
    except _Exit as stop:
        code = stop.code
    finally:
        stop_expiry.set()
        (root / ADDRESS_FILE).unlink(missing_ok=True)
        say("stopping: every job stops at a micro-batch boundary and resumes when the gateway starts again")
        gateway.shutdown()
        spark.stop()
        lock.release()
    return code


def resumed_line(resumed: list[str]) -> str:
    """The log line for the jobs started again at start-up: ``resumed 1 job on its checkpoint:
    J`` or ``resumed 2 jobs on their checkpoints: J, K``."""
    which = "1 job on its checkpoint" if len(resumed) == 1 else f"{len(resumed)} jobs on their checkpoints"
    return f"resumed {which}: {', '.join(resumed)}"


def _expire(gateway: object, stop: threading.Event) -> None:
    from .service import Gateway

    assert isinstance(gateway, Gateway)
    while not stop.wait(EXPIRY_PERIOD_SECONDS):
        try:
            gateway.expire()
        except Exception as error:  # keep expiring later; the registry may be closing
            gateway.log(f"expiry failed: {error}")


def _collect(stop: threading.Event, spark: Any) -> None:
    """Python's full collection every :data:`COLLECT_PERIOD_SECONDS` and the driver JVM's every
    :data:`JVM_COLLECT_PERIOD_SECONDS` until ``stop``."""
    last_jvm = time.monotonic()
    while not stop.wait(COLLECT_PERIOD_SECONDS):
        gc.collect()
        if time.monotonic() - last_jvm >= JVM_COLLECT_PERIOD_SECONDS:
            last_jvm = time.monotonic()
            with contextlib.suppress(Exception):  # Spark is stopping: nothing left to collect
                spark.sparkContext._jvm.java.lang.System.gc()
