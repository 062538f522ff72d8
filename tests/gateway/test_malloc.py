"""The gateway's bound on glibc's malloc arenas (src/upsertmat/gateway/malloc.py), in fresh
processes: each thread that allocates while the others hold their arenas gets one of its own
unless the bound says otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from upsertmat.gateway.malloc import arena_count

pytestmark = pytest.mark.skipif(arena_count() is None, reason="the C library is not glibc")

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


def test_the_bound_keeps_the_threads_in_two_arenas_and_is_passed_on_to_children() -> None:
    result = run("limit", {})
    assert result == {"bound": 2, "arenas": result["arenas"], "environ": {"MALLOC_ARENA_MAX": "2"}}
    assert 1 <= result["arenas"] <= 2


def test_an_operators_malloc_arena_max_wins() -> None:
    result = run("limit", {"MALLOC_ARENA_MAX": "4"})
    assert result["bound"] == 4 and result["environ"] == {"MALLOC_ARENA_MAX": "4"}
    # glibc read the variable at start only; this process was started without it, so the
    # threads still get their own arenas: the bound is the operator's, applied at exec time
    assert (result["arenas"] or 0) >= 3
