"""The registry's read connections: bounded by the reads that ran at once, not by the threads
that ever read (the ASGI server retires a worker thread idle for 10 s and starts another; a
connection per thread leaked one, with its page cache, at each). Counted as open file
descriptors on ``gateway.db``, so the test holds whatever the registry keeps inside."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from upsertmat.gateway.registry import Registry

from ..prerequisites import requires

pytestmark = requires(Path("/proc/self/fd").is_dir(), "/proc/self/fd (Linux): the test counts descriptors")


def open_descriptors(path: Path) -> int:
    """How many of this process's file descriptors are open on ``path``."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == str(path):
                count += 1
        except OSError:  # the descriptor listdir itself used, closed since
            continue
    return count


def test_reads_from_threads_that_come_and_go_reuse_one_connection(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    database = tmp_path / "gateway.db"
    try:
        session = registry.add_session({"k": "v"})
        seen: list[object] = []
        for _ in range(50):
            thread = threading.Thread(target=lambda: seen.append(registry.session(session.id)))
            thread.start()
            thread.join()
        assert seen == [session] * 50
        # the writer's connection and one read connection, not one per thread that read
        assert open_descriptors(database) == 2
    finally:
        registry.close()
    assert open_descriptors(database) == 0


def test_concurrent_reads_get_their_own_connections_and_the_right_rows(tmp_path: Path) -> None:
    registry = Registry(tmp_path)
    database = tmp_path / "gateway.db"
    try:
        sessions = [registry.add_session({"n": n}) for n in range(8)]
        errors: list[BaseException] = []
        start = threading.Barrier(8)

        def read(n: int) -> None:
            try:
                start.wait()
                for _ in range(200):
                    assert registry.session(sessions[n].id) == sessions[n]
            except BaseException as error:  # reported by the main thread
                errors.append(error)

        threads = [threading.Thread(target=read, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert 2 <= open_descriptors(database) <= 1 + 8
    finally:
        registry.close()
    assert open_descriptors(database) == 0
