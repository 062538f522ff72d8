"""What many micro-batches cost a lakehouse table's readers, and what maintenance gives back.

``upsertmat bench --pipeline --pipeline-sink delta|iceberg --table-reads N``: the sink of the
pipeline (any table-format kind of :data:`upsertmat.sinks.KINDS`) is driven directly, as
``foreachBatch`` drives it: a first batch inserts ``keys`` rows, then ``N - 1`` batches each update
``updates`` random keys (the net changes of a micro-batch), with the documented maintenance every
``maintain_every`` batches (not after the last one). The same final table is also written in ONE
batch. Reported: the sink's time and bytes per batch, the data files, and a full read of each table
(the library's own reader, median of :data:`READS`), the many-batch table before and after the
documented maintenance (:meth:`upsertmat.sinks.SinkKind.maintain`, removed files not retained). No
Spark: the micro-batches' Spark side is measured by ``--pipeline``; this isolates what the table
format accumulates. The goal: the read after maintenance at most 2x the one-batch table's."""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..sinks import KINDS, BatchSink, Column, kind_named

TABLE_FORMATS = tuple(kind.name for kind in KINDS if kind.table_format)
"""The sink kinds this benchmark measures: the table formats."""
READS = 5
COLUMNS = (Column("id", "bigint"), Column("version", "bigint"), Column("payload", "string"))
GOAL_READ_RATIO = 2.0


@dataclass(frozen=True)
class TableReads:
    """The figures of one run (seconds, bytes, files)."""

    sink: str
    keys: int
    batches: int
    updates_per_batch: int
    maintain_every: int
    batch_seconds_median: float
    bytes_per_batch: float
    files_before: int
    read_seconds_before: float
    read_seconds_after: float
    files_after: int
    read_seconds_one_batch: float
    files_one_batch: int
    maintenance_seconds: float

    @property
    def ratio(self) -> float:
        """Read after maintenance / read of the one-batch table."""
        return self.read_seconds_after / self.read_seconds_one_batch if self.read_seconds_one_batch else 0.0


def _size(path: Path) -> int:
    return sum(item.stat().st_size for item in path.rglob("*") if item.is_file())


class _Table:
    """One sink table of the run: its URL, how to open, read, count and maintain it."""

    def __init__(self, sink: str, parent: Path, name: str) -> None:
        self.sink = sink
        self.kind = kind_named(sink)
        self.url = self.kind.url_in(parent, name)
        local = self.kind.local_path(self.url)
        assert local is not None
        self.directory = local

    def open(self) -> BatchSink:
        return self.kind.open(self.url, "bench", COLUMNS, (0,))

    def read(self) -> float:
        """Median seconds of :data:`READS` full reads (a fresh table object each time)."""
        times = []
        for _ in range(READS):
            started = time.perf_counter()
            rows = self.kind.scan(self.url, "bench").num_rows
            times.append(time.perf_counter() - started)
            assert rows > 0
        return statistics.median(times)

    def files(self) -> int:
        """Live data files of the current version / snapshot."""
        return self.kind.data_files(self.url, "bench") or 0

    def maintain(self) -> None:
        self.kind.maintain(self.url, "bench", retention_hours=0)  # nothing reads older versions


def run_table_reads(
    sink: str,
    batches: int,
    keys: int = 20_000,
    updates: int = 200,
    maintain_every: int = 100,
    seed: int = 0,
    tmp_root: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> TableReads:
    """Write the table in ``batches`` micro-batches and in one, read both (see the module)."""
    say = log or (lambda _line: None)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="upsertmat-bench-reads-", dir=tmp_root) as name:
        many = _Table(sink, Path(name), "many")
        writer = many.open()
        rows = {key: (key, 0, f"p{key:08d}-{'x' * 12}") for key in range(keys)}
        writer.apply_batch("bench", 0, [("+I", row) for row in rows.values()])
        spent = []
        written = 0
        for batch in range(1, batches):
            changes = []
            for key in rng.sample(range(keys), updates):
                old = rows[key]
                rows[key] = (key, batch, f"p{key:08d}-{batch:012d}")
                changes += [("-U", old), ("+U", rows[key])]
            size = _size(many.directory)
            started = time.perf_counter()
            writer.apply_batch("bench", batch, changes)
            spent.append(time.perf_counter() - started)
            written += _size(many.directory) - size
            if maintain_every and batch % maintain_every == 0 and batch < batches - 1:
                many.maintain()  # the documented schedule (docs/spark.md); not after the last batch
            if batch % 100 == 0:
                say(f"{sink}: {batch} micro-batches, median {statistics.median(spent) * 1000:.0f} ms each")
        writer.close()
        files_before, read_before = many.files(), many.read()
        say(f"{sink}: {files_before} data files, full read {read_before * 1000:.0f} ms before maintenance")
        started = time.perf_counter()
        many.maintain()
        maintenance = time.perf_counter() - started
        files_after, read_after = many.files(), many.read()
        one = _Table(sink, Path(name), "one")
        single = one.open()
        single.apply_batch("bench", 0, [("+I", row) for row in rows.values()])
        single.close()
        read_one = one.read()
        return TableReads(
            sink=sink,
            keys=keys,
            batches=batches,
            updates_per_batch=updates,
            maintain_every=maintain_every,
            batch_seconds_median=statistics.median(spent) if spent else 0.0,
            bytes_per_batch=written / max(batches - 1, 1),
            files_before=files_before,
            read_seconds_before=read_before,
            read_seconds_after=read_after,
            files_after=files_after,
            read_seconds_one_batch=read_one,
            files_one_batch=one.files(),
            maintenance_seconds=maintenance,
        )


def report(figures: TableReads) -> str:
    """The figures as text, with the goal's ratio."""
    return "\n".join(
        [
            f"{figures.sink}: {figures.keys:,} keys, 1 insert batch + {figures.batches - 1:,} "
            f"micro-batches of {figures.updates_per_batch:,} updates, maintenance every "
            f"{figures.maintain_every} batches",
            f"  sink per micro-batch: median {figures.batch_seconds_median * 1000:,.0f} ms, "
            f"{figures.bytes_per_batch:,.0f} bytes written",
            f"  full read: {figures.read_seconds_before * 1000:,.0f} ms over {figures.files_before} "
            f"data files before maintenance, {figures.read_seconds_after * 1000:,.0f} ms over "
            f"{figures.files_after} after ({figures.maintenance_seconds:.1f} s); the same table written in "
            "one batch: "
            f"{figures.read_seconds_one_batch * 1000:,.0f} ms over {figures.files_one_batch}",
            f"  read after maintenance / one batch: {figures.ratio:.2f} (goal <= {GOAL_READ_RATIO:.0f})",
        ]
    )
