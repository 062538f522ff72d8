"""The gateway announces itself (``gateway.json``, the "listening on" line) only once its socket
accepts: a script that connects the instant the file appears is served, never refused, also on
a machine whose CPUs are busy (issue 31, item 8). The real server code on the real app (no Spark:
the routes used here need none), 50 start-ups under CPU load."""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from upsertmat.gateway.app import create_app
from upsertmat.gateway.server import HttpServer, bind, url_of, write_address
from upsertmat.gateway.service import Gateway
from upsertmat.gateway.settings import GatewaySettings

pytestmark = pytest.mark.slow

ROUNDS = 50


def announce(root: Path, url: str) -> None:
    write_address(root, url)


def test_a_client_that_connects_the_instant_the_address_file_appears_is_served(tmp_path: Path) -> None:
    burners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)
    ]
    try:
        root = tmp_path / "root"
        gateway = Gateway(GatewaySettings(root=root, port=0))
        app = create_app(gateway)
        for round_ in range(ROUNDS):
            listener = bind("127.0.0.1", 0)
            url = url_of("127.0.0.1", int(listener.getsockname()[1]), tls=False)
            http = HttpServer(app, listener, functools.partial(announce, root, url))
            thread = threading.Thread(target=http.run, daemon=True)
            thread.start()
            address = root / "gateway.json"
            try:
                while not address.exists():
                    assert thread.is_alive(), "the server thread ended before it announced itself"
                    time.sleep(0.0005)  # let the server thread run; still within a millisecond
                named = json.loads(address.read_text())["url"]
                host, port = named.removeprefix("http://").rsplit(":", 1)
                socket.create_connection((host, int(port)), timeout=30).close()  # refused would raise
                answer = httpx.get(f"{named}/v1/info", timeout=30)
                assert answer.status_code == 200, (round_, answer.text)
            finally:
                http.stop()
                thread.join(timeout=60)
                address.unlink()
            assert not thread.is_alive()
    finally:
        gateway.shutdown()
        for burner in burners:
            burner.kill()
            burner.wait()
