"""A gateway soak: an hour of a steady job compressed into many small batches, read by 8 clients.

``python tools/gateway_soak.py --minutes 30`` starts ``upsertmat gateway`` on a
temporary data root, submits one job, drops a source file every ``--file-interval`` seconds (50
upserts over ``--keys`` keys, so the table grows to that many rows and then only changes) and
runs ``--readers`` clients, each taking a table snapshot (at most 2,000 rows, pages of 250),
paging it by token, following the changelog by token and asking the job's status, then pausing
half a second. A batch takes every file that arrived since the last one (on a loaded machine a
batch takes longer than a second). Every ``--sample-seconds`` it records the gateway's and its
JVM's resident memory (``/proc``), the registry's size on disk (``gateway.db`` and its WAL)
and the snapshots and readers held (``/metrics``). At the end it prints one JSON object: RSS
right after the warm-up (the first ``--warmup-fraction`` of the run) and at the end, the
largest growth after warm-up (goal: within 10 %), the registry's largest size after warm-up,
and the p50/p99 of a page asked by token (goal: p99 <= 300 ms); ``--json FILE`` adds every
sample and the JVM's class histograms. Binds 127.0.0.1 only; stops everything it started.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

JOB = """\
name: soak
source: {path: data/soak, columns: [{id: long}, {level: long}, {badge: string}]}
keys: {primary-key: [id]}
sink: {internal: true, table: soak}
"""
ROWS_PER_FILE = 50


@dataclass
class Sample:
    """One observation: seconds since the start, RSS in MiB, registry bytes, snapshots, readers."""

    at: float
    gateway_mib: float
    jvm_mib: float
    registry_bytes: int
    snapshots: float
    snapshot_bytes: float
    readers: float
    committed_batch: int | None


@dataclass
class SoakResult:
    """What a soak measured, and the goals' verdicts."""

    minutes: float
    readers: int
    files: int
    samples: list[Sample] = field(default_factory=list)
    token_page_ms: list[float] = field(default_factory=list)
    snapshot_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warmup_fraction: float = 0.25
    histograms: dict[str, list[str]] = field(default_factory=dict)
    """The JVM's largest classes by bytes (``jcmd PID GC.class_histogram``) after warm-up and at
    the end: what grows, if anything does."""

    def after_warmup(self) -> list[Sample]:
        cut = self.minutes * 60 * self.warmup_fraction
        return [sample for sample in self.samples if sample.at >= cut]

    def growth(self, attribute: str) -> float:
        """Largest value after warm-up over the first one after warm-up, minus one."""
        values = [getattr(sample, attribute) for sample in self.after_warmup()]
        return max(values) / values[0] - 1 if values and values[0] else 0.0

    def percentile(self, values: list[float], share: float) -> float:
        if not values:
            return 0.0
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))]

    def summary(self) -> dict[str, Any]:
        after = self.after_warmup()
        return {
            "minutes": self.minutes,
            "readers": self.readers,
            "files": self.files,
            "batches": after[-1].committed_batch if after else None,
            "gateway_rss_mib": [after[0].gateway_mib, after[-1].gateway_mib] if after else None,
            "jvm_rss_mib": [after[0].jvm_mib, after[-1].jvm_mib] if after else None,
            "gateway_rss_growth": round(self.growth("gateway_mib"), 4),
            "jvm_rss_growth": round(self.growth("jvm_mib"), 4),
            "registry_max_bytes": max((s.registry_bytes for s in after), default=0),
            "registry_bytes_after_warmup": [after[0].registry_bytes, after[-1].registry_bytes]
            if after
            else None,
            "snapshots_max": max((s.snapshots for s in after), default=0),
            "token_pages": len(self.token_page_ms),
            "token_page_p50_ms": round(self.percentile(self.token_page_ms, 0.5), 1),
            "token_page_p99_ms": round(self.percentile(self.token_page_ms, 0.99), 1),
            "snapshot_p50_ms": round(self.percentile(self.snapshot_ms, 0.5), 1),
            "snapshot_p99_ms": round(self.percentile(self.snapshot_ms, 0.99), 1),
            "errors": len(self.errors),
            "first_errors": self.errors[:5],
        }


def rss_mib(pid: int) -> float:
    """Resident memory of a process, MiB (0 if it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def jvm_of(pid: int) -> int | None:
    """The Java process started by ``pid`` (PySpark's JVM: a child, in a session of its own)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and b"java" in command.split(b"\0")[0]:
            return int(entry.name)
    return None


def class_histogram(pid: int, top: int = 25) -> list[str]:
    """The first ``top`` lines of the JVM's class histogram (a full GC first: live objects
    only), or a line saying why there is none."""
    import shutil

    jcmd = shutil.which("jcmd")
    if jcmd is None:
        return ["jcmd not found (a JDK's bin/ on PATH)"]
    try:
        found = subprocess.run(
            [jcmd, str(pid), "GC.class_histogram"], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return [f"jcmd failed: {error}"]
    return found.stdout.splitlines()[: top + 3]


def drop(directory: Path, number: int, keys: int, rng: random.Random) -> None:
    """Source file ``number``: 50 upserts of random keys, written aside and renamed in."""
    rows = [
        {
            "seq": number * ROWS_PER_FILE + index,
            "op": "+U",
            "id": rng.randrange(keys),
            "level": number,
            "badge": "b",
        }
        for index in range(ROWS_PER_FILE)
    ]
    partial = directory.parent / f".soak-{number}.partial"
    partial.write_text("".join(json.dumps(row) + "\n" for row in rows))
    stamp = time.time()
    os.utime(partial, (stamp, stamp))
    os.replace(partial, directory / f"part-{number:06d}.jsonl")


def metric(text: str, name: str) -> float:
    """The value of an unlabelled sample ``name`` in a Prometheus text exposition (0 if absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def soak(args: argparse.Namespace, say: Any) -> SoakResult:
    """Run the soak ``args`` describe; its result."""
    from upsertmat.client.http import GatewayClient, GatewayError
    from upsertmat.client.launch import start_gateway

    result = SoakResult(args.minutes, args.readers, 0, warmup_fraction=args.warmup_fraction)
    rng = random.Random(31)
    with tempfile.TemporaryDirectory(prefix="upsertmat-soak-") as name:
        root = Path(name) / "root"
        source = root / "data" / "soak"
        source.mkdir(parents=True)
        stop = threading.Event()
        lock = threading.Lock()
        process, url = start_gateway(root, extra=args.gateway_arg, stderr=Path(name) / "gateway.err")
        try:
            say(f"gateway at {url}")
            control = GatewayClient(url, timeout=120)
            drop(source, 0, args.keys, rng)
            job = control.submit(control.open_session(), job=JOB).id
            while control.job(job).committed_batch is None:
                time.sleep(0.5)
            jvm = jvm_of(process.pid)

            def reader() -> None:
                own = GatewayClient(url, timeout=120)
                token: str | None = None
                try:
                    while not stop.is_set():
                        try:
                            begin = time.perf_counter()
                            page = own.table_page(job, page_size=250, max_rows=2_000)
                            with lock:
                                result.snapshot_ms.append((time.perf_counter() - begin) * 1000)
                            while page.next_token and not stop.is_set():
                                begin = time.perf_counter()
                                page = own.table_page(job, page.next_token)
                                with lock:
                                    result.token_page_ms.append((time.perf_counter() - begin) * 1000)
                            begin = time.perf_counter()
                            changes = own.changelog_page(job, token, 500)
                            if token is not None:
                                with lock:
                                    result.token_page_ms.append((time.perf_counter() - begin) * 1000)
                            token = changes.next_token
                            own.job(job)
                        except GatewayError as error:
                            with lock:
                                result.errors.append(f"{error.status}: {error.message}")
                            token = None
                        stop.wait(0.5)
                finally:
                    own.close()

            threads = [threading.Thread(target=reader, daemon=True) for _ in range(args.readers)]
            for thread in threads:
                thread.start()
            begin = time.monotonic()
            end = begin + args.minutes * 60
            next_file = begin
            next_sample = begin
            number = 1
            while time.monotonic() < end:
                now = time.monotonic()
                if now >= next_file:
                    drop(source, number, args.keys, rng)
                    number += 1
                    next_file += args.file_interval
                warm = now - begin >= args.minutes * 60 * args.warmup_fraction
                if jvm and warm and "after warm-up" not in result.histograms:
                    result.histograms["after warm-up"] = class_histogram(jvm)
                if now >= next_sample:
                    text = control._send("GET", "/metrics").text
                    registry = sum(
                        (root / f"gateway.db{suffix}").stat().st_size
                        for suffix in ("", "-wal")
                        if (root / f"gateway.db{suffix}").exists()
                    )
                    sample = Sample(
                        at=round(now - begin, 1),
                        gateway_mib=round(rss_mib(process.pid), 1),
                        jvm_mib=round(rss_mib(jvm), 1) if jvm else 0.0,
                        registry_bytes=registry,
                        snapshots=metric(text, "upsertmat_gateway_snapshots"),
                        snapshot_bytes=metric(text, "upsertmat_gateway_snapshot_bytes"),
                        readers=metric(text, "upsertmat_gateway_readers"),
                        committed_batch=control.job(job).committed_batch,
                    )
                    result.samples.append(sample)
                    say(
                        f"{sample.at:7.0f} s: gateway {sample.gateway_mib:.0f} MiB, "
                        f"JVM {sample.jvm_mib:.0f} MiB, "
                        f"registry {registry / 2**20:.1f} MiB, {sample.snapshots:.0f} snapshots, "
                        f"batch {sample.committed_batch}"
                    )
                    next_sample += args.sample_seconds
                time.sleep(0.05)
            result.files = number
            if jvm:
                result.histograms["at the end"] = class_histogram(jvm)
            stop.set()
            for thread in threads:
                thread.join(timeout=120)
            control.close()
        finally:
            stop.set()
            process.terminate()
            try:
                process.wait(timeout=180)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    return result


def main(argv: list[str] | None = None) -> int:
    """``python tools/gateway_soak.py``: exit 0 when every goal holds, 1 otherwise."""
    parser = argparse.ArgumentParser(
        prog="python tools/gateway_soak.py",
        description="A gateway soak: a file every second, 8 readers; RSS, registry size, page latency.",
        epilog="exit codes: 0 every goal met; 1 a goal missed; 2 usage.",
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="how long (default 30)")
    parser.add_argument("--readers", type=int, default=8, help="concurrent clients (default 8)")
    parser.add_argument("--file-interval", type=float, default=1.0, help="seconds between files (default 1)")
    parser.add_argument(
        "--keys", type=int, default=4_000, help="distinct keys (rows of the table, default 4000)"
    )
    parser.add_argument(
        "--sample-seconds", type=float, default=15.0, help="seconds between samples (default 15)"
    )
    parser.add_argument(
        "--warmup-fraction", type=float, default=0.25, help="share of the run that is warm-up (default 0.25)"
    )
    parser.add_argument(
        "--gateway-arg",
        action="append",
        default=[],
        metavar="ARG",
        help="an extra argument of `upsertmat gateway` (repeatable), e.g. --gateway-arg=--spark-conf=...",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write every sample and the summary here")
    args = parser.parse_args(argv)

    def stop(number: int, frame: Any) -> None:
        raise SystemExit(128 + number)  # through soak()'s finally: the gateway is stopped too

    signal.signal(signal.SIGTERM, stop)
    result = soak(args, lambda text: print(text, file=sys.stderr, flush=True))
    summary = result.summary()
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "summary": summary,
                    "samples": [asdict(s) for s in result.samples],
                    "histograms": result.histograms,
                },
                indent=1,
            )
        )
    print(json.dumps(summary, indent=1))
    met = (
        summary["gateway_rss_growth"] <= 0.10
        and summary["jvm_rss_growth"] <= 0.10
        and summary["token_page_p99_ms"] <= 300
        and summary["errors"] == 0
    )
    if result.token_page_ms:
        print(f"p50 of a page by token: {statistics.median(result.token_page_ms):.1f} ms", file=sys.stderr)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
