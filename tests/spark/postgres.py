"""A throw-away PostgreSQL server on 127.0.0.1 for the sink tests.

Uses the server binaries of the distribution package ``postgresql`` (``initdb``/``pg_ctl`` on
PATH or under ``/usr/lib/postgresql/*/bin``). As root the server runs as the ``postgres`` user
(PostgreSQL refuses to run as root). Data lives in a fresh temporary directory; the server is
stopped and the directory removed at teardown.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def server_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    found = shutil.which("initdb")
    if found:
        candidates.insert(0, str(Path(found).resolve().parent))
    for candidate in candidates:
        if (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """A throw-away server on 127.0.0.1 (trust auth, fsync off) that a test can stop and start."""

    def __init__(self, binaries: Path) -> None:
        self.binaries = binaries
        as_root = os.geteuid() == 0
        # As root the server runs as the postgres user, who cannot enter pytest's 0700 directories
        # (where the tests point TMPDIR): its files go in the system's /tmp, removed by remove().
        self.root = Path(tempfile.mkdtemp(prefix="upsertmat-pg-", dir="/tmp" if as_root else None))
        self.data = self.root / "data"
        self.prefix: list[str] = []
        if as_root:
            user = pwd.getpwnam("postgres")
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self.prefix = ["runuser", "-u", "postgres", "--"]
        self.port = free_port()
        self._run(
            str(binaries / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8"
        )

    @property
    def url(self) -> str:
        """``postgresql://postgres@127.0.0.1:PORT/postgres``."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        subprocess.run([*self.prefix, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> None:
        """Start (or start again) the server and wait until it accepts connections."""
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            str(self.binaries / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
            "-w", "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server (fast shutdown: open connections are cut)."""
        self._run(str(self.binaries / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        """Delete its files (after :meth:`stop`)."""
        shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def postgres_server(binaries: Path) -> Iterator[str]:
    """Start a server; yield its URL (``postgresql://postgres@127.0.0.1:PORT/postgres``)."""
    server = PostgresServer(binaries)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()
        server.remove()


_databases = itertools.count()


def new_database(url: str, prefix: str) -> str:
    """The URL of a new, empty database ``PREFIX_N`` on the server at ``url`` (N unique in the
    test session), for a test that must not see another test's tables or statistics."""
    import psycopg

    name = f"{prefix}_{next(_databases)}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + f"/{name}"
