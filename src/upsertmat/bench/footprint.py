"""What state costs in memory and on disk: bytes per live row, and the process's peak RSS.

* **Heap state** is measured with :mod:`tracemalloc`: the bytes allocated (and still held)
  while a materializer is built and fed, divided by the live rows it holds at the end. The
  input changes are built *before* tracing starts, so the rows themselves are not counted
  (a heap layout stores the input's row object by reference): what is left is the layout's
  own overhead (dicts, lists, records, match keys, context keys). tracemalloc sees what
  ``sys.getsizeof`` cannot, such as a bytes object that keeps a larger buffer than its
  contents (orjson's output, issue #30). Tracing slows the run several-fold, so it is a
  separate, untimed pass.
* **Byte backends** are measured on disk after a durable commit: the bytes of the state
  directory's files (what ``du --apparent-size`` would say of them, the sparse LMDB map
  counted by its pages in use, ``last_pgno + 1`` pages, not by its apparent size).
* **Peak RSS**: ``ru_maxrss`` of the process (``getrusage``), in bytes: the high-water mark of
  the whole process so far, not of one cell; for the pipeline, :class:`RssSampler` samples the
  process and its descendants (Spark's JVM, its Python workers) by role.

Every function is O(state) or O(changes); none is timed.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..spec import Change

__all__ = [
    "RssSampler",
    "directory_bytes",
    "jvm_cpu_seconds",
    "lmdb_pages",
    "lmdb_pages_under",
    "peak_rss_bytes",
    "traced_state_bytes",
]


def peak_rss_bytes() -> int:
    """The process's peak resident set size so far, in bytes (``ru_maxrss``; kilobytes on
    Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def children_peak_rss_bytes() -> int:
    """The largest peak RSS of the waited-for child processes so far, in bytes."""
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


def traced_state_bytes(build: Callable[[], Any], changes: Iterable[Change]) -> tuple[int, Any]:
    """``(bytes, materializer)``: the bytes allocated and still held after ``build()`` and
    ``materializer.process_many(changes)`` under tracemalloc (outputs dropped), the
    materializer still open (the caller closes it). ``changes`` must be built already (a
    list), so the rows are not counted. O(changes)."""
    pending = list(changes)
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        materializer = build()
        out: list[Change | None] = []
        for start in range(0, len(pending), 4096):
            out.clear()  # outputs are not state
            materializer.process_many(pending[start : start + 4096], out)
        out.clear()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return held, materializer


def directory_bytes(path: Path) -> int:
    """The bytes of every regular file under ``path`` (apparent sizes; an LMDB ``data.mdb``
    counted by its pages in use: :func:`lmdb_pages`)."""
    total = 0
    for file in path.rglob("*"):
        if not file.is_file():
            continue
        if file.name == "data.mdb":
            pages = lmdb_pages(file.parent)
            if pages is not None:
                total += pages[0] * pages[1]
                continue
        total += file.stat().st_size
    return total


def lmdb_pages_under(path: Path) -> int | None:
    """The pages in use of every LMDB environment under ``path`` (a state directory), or None
    if there is none."""
    found = [lmdb_pages(data.parent) for data in path.rglob("data.mdb")]
    pages = [pair[0] for pair in found if pair is not None]
    return sum(pages) if pages else None


def lmdb_pages(directory: Path) -> tuple[int, int] | None:
    """``(pages in use, page size)`` of the LMDB environment in ``directory`` (read-only,
    without a lock), or None if it cannot be opened."""
    try:
        import lmdb

        env = lmdb.open(str(directory), readonly=True, lock=False, subdir=True)
    except Exception:
        return None
    try:
        return int(env.info()["last_pgno"]) + 1, int(env.stat()["psize"])
    finally:
        env.close()


def _rss_of(pid: int) -> int:
    """The resident set size of process ``pid`` in bytes (``/proc/PID/statm``), 0 if gone."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _children() -> dict[int, list[int]]:
    """Parent pid -> child pids of every process visible in ``/proc`` (Linux)."""
    tree: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry.name))
    return tree


def _descendant_roles(root: int) -> dict[int, str]:
    """Every descendant of ``root`` with its role: ``jvm`` for a ``java`` process, else ``workers``."""
    tree = _children()
    roles: dict[int, str] = {}
    pending = list(tree.get(root, []))
    while pending:
        pid = pending.pop()
        pending.extend(tree.get(pid, []))
        roles[pid] = "jvm" if os.path.basename(_command(pid)) == "java" else "workers"
    return roles


def _command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return cmdline.read().split(b"\0", 1)[0].decode("utf-8", "replace")
    except OSError:
        return ""


def jvm_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process's ``java`` descendants so far (Spark's JVM),
    from ``/proc/PID/stat``; 0 where there is no ``/proc``. O(processes)."""
    if not os.path.isdir("/proc"):
        return 0.0
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for pid, role in _descendant_roles(os.getpid()).items():
        if role != "jvm":
            continue
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
        except (OSError, ValueError, IndexError):
            continue
    return total


class RssSampler:
    """The peak RSS of this process and of its descendants, by role, sampled every
    ``interval`` seconds in a daemon thread while running (a ``with`` block): ``driver`` (this
    Python process), ``jvm`` (descendant ``java`` processes: Spark's driver JVM and executors,
    summed per sample) and ``workers`` (other descendant Python processes: Spark's Python
    workers and their daemon, summed per sample). ``/proc`` only (Linux), elsewhere only
    ``driver`` is measured, from ``getrusage``.

    Cost: finding the descendants reads every process's ``/proc/PID/stat`` (~3.6 ms of CPU with
    ~75 processes, holding the GIL of the process being measured), so the thread does it every
    ``rescan`` seconds and in between reads only the known descendants' ``statm`` (~30 us
    each): ~0.5 % of a core instead of ~1.8 % at the defaults. A process that lives less than
    ``rescan`` seconds may be missed."""

    def __init__(self, interval: float = 0.2, rescan: float = 1.0) -> None:
        self.interval = interval
        self.rescan = rescan
        self.peaks: dict[str, int] = {"driver": 0, "jvm": 0, "workers": 0}
        self.scans = 0  # how often /proc was walked for descendants (the costly part)
        self._roles: dict[int, str] = {}  # descendant pid -> role, as of the last scan
        self._scanned_at = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        """One sample of every role, the descendants found afresh."""
        self._sample(rescan=True)

    def _sample(self, rescan: bool) -> None:
        me = os.getpid()
        totals = {"driver": _rss_of(me), "jvm": 0, "workers": 0}
        if os.path.isdir("/proc"):
            if rescan or time.monotonic() - self._scanned_at >= self.rescan:
                self._roles = _descendant_roles(me)
                self._scanned_at = time.monotonic()
                self.scans += 1
            for pid, role in self._roles.items():
                totals[role] += _rss_of(pid)
        for role, value in totals.items():
            self.peaks[role] = max(self.peaks[role], value)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample(rescan=False)

    def __enter__(self) -> RssSampler:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="upsertmat-rss", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()
        self.peaks["driver"] = max(self.peaks["driver"], peak_rss_bytes())
