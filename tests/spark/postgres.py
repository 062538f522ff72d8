"""A throw-away PostgreSQL server on 127.0.0.1 for the sink tests.

Uses the server binaries of the distribution package ``postgresql`` (``initdb``/``pg_ctl`` on
PATH or under ``/usr/lib/postgresql/*/bin``). As root the server runs as the ``postgres`` user
(PostgreSQL refuses to run as root). Data lives in a fresh temporary directory; the server is
stopped and the directory removed at teardown.
"""

from __future__ import annotations

import glob
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


@contextmanager
def postgres_server(binaries: Path) -> Iterator[str]:
    """Start a server; yield its URL (``postgresql://postgres@127.0.0.1:PORT/postgres``)."""
    root = Path(tempfile.mkdtemp(prefix="upsertmat-pg-"))
    data = root / "data"
    prefix: list[str] = []
    if os.geteuid() == 0:
        user = pwd.getpwnam("postgres")
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    port = free_port()

    def run(*args: str) -> None:
        subprocess.run([*prefix, *args], check=True, capture_output=True, timeout=120)

    run(str(binaries / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "start")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)
