"""The PostgreSQL sink alone, at table size: what one batch's transaction costs and what it makes
the server write (WAL records, full-page images, bytes; HOT updates).

``python tools/pg_sink_wal.py --url postgresql://bench@127.0.0.1:55432/scale --size 10000000``
creates a table of its own on the server (``--fillfactor``: the table's storage parameter; 0
leaves it to the sink, which creates its tables with
:data:`~upsertmat.sinks.postgresql.FILLFACTOR`), loads ``--size`` rows of the pipeline scale
benchmark's shape (``id``, ``version``, ``payload``) with ``COPY`` and ``VACUUM ANALYZE``, then
runs ``--batches`` batches through :class:`~upsertmat.sinks.postgresql.PostgresSink`, each
``--upserts`` ``-U``/``+U`` pairs of uniformly random keys (as ``bench --pipeline
--table-sizes``). It prints one JSON object per line: the load, then per batch the seconds of
``apply_batch`` (the sink's one transaction) and the server's counters over it — ``pg_stat_wal``
(records, full-page images, bytes), checkpoints (``pg_stat_bgwriter``), the table's updates and
HOT updates (``pg_stat_user_tables``) — and the server's WAL settings at the end. Each batch
opens a sink of its own and closes it, so the server counts the batch's statistics when the
session ends (the tool waits for all of them); only the ``apply_batch`` call is timed. The table and
its batch records are dropped at the end. The server's counters are global: run it on a server
nothing else writes to (docs/spark.md, *PostgreSQL at table scale*).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time
from typing import Any

from upsertmat.bench.scale import PAYLOAD
from upsertmat.sinks.base import Column
from upsertmat.sinks.postgresql import PostgresSink
from upsertmat.sinks.sql import BATCHES_TABLE
from upsertmat.spec.changes import Row

COLUMNS = (Column("id", "bigint"), Column("version", "bigint"), Column("payload", "string"))
SETTINGS = ("shared_buffers", "wal_compression", "max_wal_size", "checkpoint_timeout", "full_page_writes")
STATS_WAIT = 15.0
"""Seconds to wait for an ended session's statistics to reach the server's views."""


def row(key: int, version: int) -> tuple[int, int, str]:
    """The scale benchmark's row of ``key`` at ``version`` (``upsertmat.bench.scale``)."""
    return (key, version, f"{version:08d}-{key:015d}"[:PAYLOAD])


def main(argv: list[str] | None = None) -> None:
    """Parse the options, run the batches on a table of the tool's own, drop it."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="postgresql://... of a server to write to")
    parser.add_argument("--size", type=int, default=10_000_000, help="rows loaded before the batches")
    parser.add_argument("--batches", type=int, default=8, help="measured batches")
    parser.add_argument("--upserts", type=int, default=50_000, help="-U/+U pairs per batch")
    parser.add_argument("--fillfactor", type=int, default=0, help="10-100, or 0: the sink's own")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for option in ("size", "batches", "upserts"):
        if getattr(args, option) < 1:
            parser.error(f"--{option} must be >= 1")
    if args.fillfactor and not 10 <= args.fillfactor <= 100:
        parser.error("--fillfactor must be 0 or 10-100")
    import psycopg

    table = f"pg_sink_wal_{os.getpid()}"
    query = f"pg-sink-wal-{os.getpid()}-{time.time_ns()}"
    with psycopg.connect(args.url, autocommit=True) as admin:
        try:
            load(admin, args.url, table, args.size, args.fillfactor)
            run(admin, args.url, table, query, args)
        finally:
            admin.execute(f'DROP TABLE IF EXISTS "{table}"')
            admin.execute(f"DELETE FROM {BATCHES_TABLE} WHERE query_id = %s", (query,))


def load(admin: Any, url: str, table: str, size: int, fillfactor: int) -> None:
    """Create ``table`` as the sink does (with ``fillfactor`` instead of the sink's own, unless
    0), COPY ``size`` rows, print the load."""
    PostgresSink(url, table, COLUMNS, [0]).close()
    if fillfactor:  # the table is empty: every page is written under the new setting
        admin.execute(f'ALTER TABLE "{table}" SET (fillfactor = {fillfactor})')
    started = time.perf_counter()
    with admin.cursor() as cursor, cursor.copy(f'COPY "{table}" (id, version, payload) FROM STDIN') as copy:
        for key in range(size):
            copy.write_row(row(key, 0))
    admin.execute(f'VACUUM ANALYZE "{table}"')
    found = admin.execute("SELECT reloptions FROM pg_class WHERE relname = %s", (table,)).fetchone()
    print(
        json.dumps(
            {
                "rows": size,
                "load_seconds": round(time.perf_counter() - started, 3),
                "reloptions": found[0] if found else None,
            }
        ),
        flush=True,
    )


def counters(admin: Any, table: str) -> list[int]:
    """WAL records, full-page images, bytes; checkpoints; the table's updates and HOT updates."""
    wal = admin.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal").fetchone()
    checkpoints = admin.execute("SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter").fetchone()
    updates = admin.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = %s", (table,)
    ).fetchone()
    return [int(value) for value in (*wal, *checkpoints, *(updates or (0, 0)))]


def run(admin: Any, url: str, table: str, query: str, args: argparse.Namespace) -> None:
    """The measured batches (see the module); one JSON line each, then the server's settings."""
    rng = random.Random(args.seed)
    versions: dict[int, int] = {}
    updated = counters(admin, table)[4]
    for batch in range(args.batches):
        changes: list[tuple[str, Row]] = []
        for _ in range(args.upserts):
            key = rng.randrange(args.size)
            old = versions.get(key, 0)
            versions[key] = old + 1
            changes += [("-U", row(key, old)), ("+U", row(key, old + 1))]
        keys = len({change[1][0] for change in changes})
        before = counters(admin, table)
        sink = PostgresSink(url, table, COLUMNS, [0])
        try:
            started = time.perf_counter()
            sink.apply_batch(query, batch, changes)
            seconds = time.perf_counter() - started
        finally:
            sink.close()
        updated += keys  # every key of the batch is in the table: each upsert is an update
        after = wait_for_statistics(admin, table, updated, before[0] + keys)
        delta = [new - old for new, old in zip(after, before, strict=True)]
        print(
            json.dumps(
                {
                    "batch": batch,
                    "keys": keys,
                    "seconds": round(seconds, 3),
                    "wal_records": delta[0],
                    "wal_fpi": delta[1],
                    "wal_bytes": delta[2],
                    "checkpoints": delta[3],
                    "updates": delta[4],
                    "hot_updates": delta[5],
                }
            ),
            flush=True,
        )
    settings = {name: admin.execute(f"SHOW {name}").fetchone()[0] for name in SETTINGS}
    print(json.dumps({"settings": settings}), flush=True)


def wait_for_statistics(admin: Any, table: str, updated: int, wal_records: int) -> list[int]:
    """The counters once the table's update count reaches ``updated`` and the WAL record count
    ``wal_records`` (each update writes at least one record); RuntimeError after
    :data:`STATS_WAIT`.

    An ended session's statistics reach the views shortly after it ends, and not all at once:
    the server flushes the table's counters and the WAL's one after the other, so a reader can
    see the updates counted and the WAL not yet. Waiting for both reads the batch whole."""
    deadline = time.monotonic() + STATS_WAIT
    while True:
        found = counters(admin, table)
        if found[4] >= updated and found[0] >= wal_records:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the server counted {found[4]} updates of {table} (expected {updated}) and"
                f" {found[0]} WAL records (expected at least {wal_records})"
            )
        time.sleep(0.05)


if __name__ == "__main__":
    main()
