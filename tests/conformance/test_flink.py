"""Apache Flink 2.3's real SinkUpsertMaterializer under the suite (the ``flink`` extra; ``tox -e
flink``, which CI runs; in CI a missing PyFlink fails these tests instead of skipping them).

The committed conformance matrix is regenerated: every row (our implementations, ``upsertmat
replay``, the Java example, Flink 2.3.0 per strategy and state backend) runs again into a copy
of docs/, and what the rows find must be what the committed page says
(:func:`upsertmat.conformance.tools.matrix.findings`: every cell, count and reason, and each
row's report with its counterexamples; not when, where or with which versions it ran). So the
Flink rows (LEGACY and VALUE conform, MAP and ADAPTIVE 3/1 fail their pinned streams with an
upsert key: FLINK-39740) are checked on every CI run, and a change of the suite that changes a
row fails CI until the page is regenerated. The driver's own guarantees (state across chunks,
the state backend asked for) are tested on one short stream.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from upsertmat.conformance.tools import matrix

from ..flinkextra import require_pyflink

pytestmark = [pytest.mark.slow, pytest.mark.flink]
ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


@pytest.fixture(autouse=True)
def pyflink_installed() -> None:
    require_pyflink()


def groups() -> list[list[str]]:
    """The matrix's rows in the processes that run them side by side: ours and the programs
    (mostly CPU), and Flink's per state backend (mostly the JVMs' starts and jobs' latency)."""
    rows = matrix.rows()
    found = [[row.name for row in rows if row.needs != "flink"]]
    found += [
        [row.name for row in rows if row.needs == "flink" and row.name.endswith(b)]
        for b in matrix.FLINK_BACKENDS
    ]
    assert sorted(name for group in found for name in group) == sorted(row.name for row in rows)
    return found


def copy_of_docs(directory: Path) -> Path:
    """The committed matrix's JSON and reports in ``directory/docs``."""
    docs = directory / "docs"
    docs.mkdir(parents=True)
    shutil.copy(DOCS / matrix.DATA, docs / matrix.DATA)
    shutil.copytree(DOCS / "conformance-reports", docs / "conformance-reports")
    return docs


def test_the_committed_matrix_is_what_the_suite_finds(tmp_path: Path) -> None:
    started = time.monotonic()
    runs: list[tuple[Path, Path, subprocess.Popen[bytes]]] = []
    rows = groups()
    try:
        for number, names in enumerate(rows):
            docs, log = copy_of_docs(tmp_path / str(number)), tmp_path / f"{number}.log"
            argv = [sys.executable, "-m", "upsertmat", "conformance-matrix", "-o", str(docs)]
            argv += [word for name in names for word in ("--rows", name)]
            with log.open("wb") as sink:
                runs.append((docs, log, subprocess.Popen(argv, cwd=ROOT, stdout=sink, stderr=sink)))
        for _, log, process in runs:
            process.wait(timeout=5400)
            output = log.read_text(encoding="utf-8", errors="replace")
            print(output)  # each row's time, in CI's log (-rA)
            assert process.returncode == 0, output[-4000:]
            assert "left out" not in output, output  # PyFlink and a JDK are there: every row ran
    finally:
        for _, _, process in runs:
            if process.poll() is None:
                process.kill()
                process.wait()
    merged = runs[0][0]
    for (docs, _, _), names in zip(runs[1:], rows[1:], strict=True):  # beside the first's, rendered again
        for name in names:
            for path in (docs / "conformance-reports").glob(f"{name}.*"):
                shutil.copy(path, merged / "conformance-reports" / path.name)
    again = subprocess.run(
        [sys.executable, "-m", "upsertmat", "conformance-matrix", "-o", str(merged), "--no-run"],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    print(f"the matrix took {time.monotonic() - started:.0f} s")
    lines = matrix.differences(matrix.findings(DOCS), matrix.findings(merged))
    assert not lines, (
        "docs/conformance-matrix.md is not what the suite finds now; regenerate it with "
        "`upsertmat conformance-matrix` (docs/conformance.md, 'The conformance matrix'). "
        "Committed -> found:\n" + "\n".join(lines[:80])
    )


STREAM = [
    '{"op": "+I", "row": [1, "u30", 10, "a"]}',
    '{"op": "+I", "row": [1, "u20", 10, "b"]}',
    '{"op": "+I", "row": [1, "u30", 10, "a"]}',
    '{"op": "-D", "row": [1, "u30", 10, "a"]}',
    '{"op": "+I", "row": [1, "u10", 10, "c"]}',
]
"""FLINK-39740's crash under MAP (docs/conformance.md); LEGACY gives the model's outputs."""
EXPECTED = [
    '{"in": 0, "op": "+I", "row": [1, "u30", 10, "a"]}',
    '{"in": 1, "op": "+U", "row": [1, "u20", 10, "b"]}',
    '{"in": 2, "op": "+U", "row": [1, "u30", 10, "a"]}',
    '{"in": 4, "op": "+U", "row": [1, "u10", 10, "c"]}',
]


def descendants(pid: int) -> list[int]:
    """``pid`` and every process under it (Linux /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found = [pid]
    for child, parent in sorted(parents.items()):
        if parent in found:
            found.append(child)
    return found


def listening(pids: list[int]) -> set[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses the processes ``pids`` listen on (TCP, from /proc/net)."""
    inodes = set()
    for pid in pids:
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith("socket:["):
                    inodes.add(target[len("socket:[") : -1])
    found: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                raw = bytes.fromhex(fields[1].split(":")[0])
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(ipaddress.ip_address(words))
    return found


def test_the_driver_keeps_state_across_pauses_on_the_backend_it_names(tmp_path: Path) -> None:
    env = {**os.environ, "FLINK_LOG_DIR": str(tmp_path)}  # this JVM's log on its own
    process = subprocess.Popen(
        [sys.executable, "-m", "upsertmat", "conformance-flink", "--strategy", "LEGACY",
         "--backend", "rocksdb", "--pk", "0", "--upsert-key", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write("\n".join(STREAM[:2]) + "\n")
        process.stdin.flush()
        first = [process.stdout.readline().strip() for _ in range(2)]  # a chunk of its own: one job
        addresses = listening(descendants(process.pid))  # the JVM and its cluster are up
        # the second chunk's job replays the key's first two changes before its own
        rest, stderr = process.communicate("\n".join(STREAM[2:]) + "\n", timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, stderr
    assert first + rest.splitlines() == EXPECTED
    log = "".join(path.read_text(encoding="utf-8", errors="replace") for path in tmp_path.glob("*.log"))
    assert "EmbeddedRocksDBStateBackend" in log  # Flink's own word, besides the driver's check
    assert addresses  # py4j's gateway, the cluster's RPC, BLOB and REST servers
    unmapped = {getattr(address, "ipv4_mapped", None) or address for address in addresses}
    assert all(address.is_loopback for address in unmapped), addresses
