"""The gateway's HTTP service in this process, without Spark: the real app on the real server
(uvicorn on a loopback socket, :class:`upsertmat.gateway.server.HttpServer`), talked to by a
real HTTP client. Jobs are put into the registry directly and their sinks written by the tests
(no query runs), so everything but the Spark query is the code a user meets. No test here
submits a job that would start (that would start Spark)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from upsertmat.gateway.app import create_app
from upsertmat.gateway.server import HttpServer, bind, url_of
from upsertmat.gateway.service import Gateway
from upsertmat.gateway.settings import GatewaySettings

TOKEN = "in-process-token-5c2e"


@dataclass
class Served:
    """A gateway served in a thread: its service object, its URL and its data root."""

    gateway: Gateway
    url: str
    root: Path
    http: HttpServer
    thread: threading.Thread

    def stop(self) -> None:
        self.http.stop()
        self.thread.join(timeout=60)
        self.gateway.shutdown()


def serve_in_thread(
    settings: GatewaySettings, log: Callable[[str], None] | None = None, **tls: Any
) -> Served:
    """Start ``settings``' gateway (no Spark) on a free loopback port; returns once it accepts.
    ``log``: where the server's own lines go (default: stderr)."""
    gateway = Gateway(settings)
    listener = bind("127.0.0.1", 0)
    url = url_of("127.0.0.1", int(listener.getsockname()[1]), tls=bool(tls))
    ready = threading.Event()
    http = HttpServer(create_app(gateway), listener, ready.set, log=log, **tls)
    thread = threading.Thread(target=http.run, daemon=True)
    thread.start()
    assert ready.wait(60), "the in-process gateway did not start"
    return Served(gateway, url, settings.root.resolve(), http, thread)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("gateway") / "root"
    (root / "data").mkdir(parents=True)
    settings = GatewaySettings(root=root, port=0, token=TOKEN, max_body_bytes=64 << 10, max_page_size=1000)
    found = serve_in_thread(settings)
    yield found
    found.stop()
