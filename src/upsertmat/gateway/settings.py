"""The gateway's own settings: where it keeps things, where it listens, and its bounds.

Every bound is a setting (``upsertmat gateway --help`` lists the options): the request body
size, the number of running jobs and of sessions, a session's idle time before it expires, how
long a table snapshot lives, how many rows one holds, and the page sizes.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PORT = 8083  # Flink's SQL Gateway REST port


@dataclass(frozen=True)
class GatewaySettings:
    """One gateway's configuration (see ``docs/gateway.md``, "Settings")."""

    root: Path
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    token: str | None = None
    master: str = "local[2]"
    defaults: dict[str, Any] = field(default_factory=dict)
    """The service defaults: a configuration layer above the built-in one, below sessions."""
    trigger_interval: str = "1000 milliseconds"
    max_body_bytes: int = 1 << 20
    max_jobs: int = 8
    max_sessions: int = 64
    session_idle_seconds: float = 1800.0
    snapshot_seconds: float = 600.0
    cursor_idle_seconds: float = 3600.0
    max_snapshot_rows: int = 100_000
    max_snapshots: int = 64
    """Table snapshots held at once (all jobs); the oldest goes first."""
    max_snapshot_bytes: int = 64 << 20
    """Bytes of all snapshots' pages together; the oldest goes first."""
    max_readers: int = 256
    """Changelog readers held at once; the least recently used goes first."""
    default_page_size: int = 500
    max_page_size: int = 10_000
    tls_certfile: Path | None = None
    tls_keyfile: Path | None = None
    plain_http: bool = False
    """Listen off loopback without TLS (behind a proxy that terminates TLS)."""
    driver_memory: str = "1g"
    """The Spark driver JVM's heap (``spark.driver.memory``)."""
    spark_conf: dict[str, str] = field(default_factory=dict)
    """Spark settings of the gateway's session, over its own bounds (``--spark-conf``)."""

    @property
    def tls(self) -> bool:
        """True when the gateway serves HTTPS (a certificate and its key are configured)."""
        return self.tls_certfile is not None

    @property
    def loopback(self) -> bool:
        """True when the bind address is a loopback one (127.0.0.0/8, ::1, localhost)."""
        return is_loopback(self.host)


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback IP addresses."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
