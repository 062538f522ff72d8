"""The gateway's bound on glibc's malloc arenas (src/upsertmat/gateway/malloc.py), in fresh
processes: each thread that allocates while the others hold their arenas gets one of its own
unless the bound says otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from upsertmat.gateway.malloc import arena_count

from ..prerequisites import requires

pytestmark = requires(arena_count() is not None, "glibc (the gateway bounds glibc's malloc arenas)")

THREADS = """
import json, os, sys, threading
from upsertmat.gateway.malloc import arena_count, limit_arenas
environ = json.loads(sys.argv[1])
bound = limit_arenas(2, environ) if sys.argv[2] == "limit" else None
barrier = threading.Barrier(8)
def allocate():
    barrier.wait()  # all eight alive at once: none can take an arena another gave back
    kept = [bytearray(4096 + size) for size in range(200)]
    barrier.wait()
threads = [threading.Thread(target=allocate) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(json.dumps({"bound": bound, "arenas": arena_count(), "environ": environ}))
"""


def run(mode: str, environ: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", THREADS, json.dumps(environ), mode],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},  # no MALLOC_ARENA_MAX of the test run's own
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_without_the_bound_eight_threads_make_arenas_of_their_own() -> None:
    assert (run("none", {})["arenas"] or 0) >= 3  # what the bound is for; glibc allows 8 per core


def test_the_bound_keeps_the_threads_in_two_arenas() -> None:
    result = run("limit", {})
    assert result["bound"] == 2 and 1 <= result["arenas"] <= 2
    assert result["environ"] == {}  # not passed on: Spark's JVM keeps glibc's default


def test_an_operators_malloc_arena_max_wins() -> None:
    result = run("limit", {"MALLOC_ARENA_MAX": "4"})
    assert result["bound"] == 4
    # glibc reads the variable when a process starts; this one started without it and the
    # bound did not call mallopt, so its threads still took arenas of their own
    assert result["arenas"] >= 3
