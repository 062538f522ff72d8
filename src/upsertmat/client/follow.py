"""Following a gateway job's results with the same renderers as an embedded run.

- :func:`fetch_table`: every page of ONE snapshot (one committed batch), following
  ``next_token``; a page that fails to arrive is asked again with the same token.
- :func:`follow_changelog`: the changelog from the start (or from now), page after page; a
  request that fails is retried with the same token (the gateway answers the current and the
  previous token, so a retry never loses or repeats a change); ends at ``eos``.

Both poll every ``interval`` seconds and stop when ``stop()`` turns true. O(rows or changes).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from .http import GatewayClient, GatewayError
from .render import Renderer
from .results import ResultChange, Snapshot

RETRIES = 5
TERMINAL = ("STOPPED", "FAILED")


def _retrying(call: Callable[[], dict[str, Any]], stop: Callable[[], bool]) -> dict[str, Any] | None:
    """``call()``, asked again (same arguments) after a connection failure; None when stopped."""
    for attempt in range(RETRIES):
        if stop():
            return None
        try:
            return call()
        except GatewayError as error:
            if error.status != 0 or attempt == RETRIES - 1:
                raise
            time.sleep(0.5 * (attempt + 1))
    return None


def fetch_table(client: GatewayClient, job: str, max_rows: int, stop: Callable[[], bool]) -> Snapshot | None:
    """The job's table as one committed batch left it (at most ``max_rows`` rows), all pages."""
    page = _retrying(lambda: client.table_page(job, max_rows=max_rows, page_size=min(max_rows, 10_000)), stop)
    if page is None:
        return None
    rows = [tuple(row) for row in page["rows"]]
    while page["next_token"] is not None:
        token = page["next_token"]
        following = _retrying(functools.partial(client.table_page, job, token=token), stop)
        if following is None:
            return None
        page = following
        rows.extend(tuple(row) for row in page["rows"])
    return Snapshot(page["batch"], tuple(page["columns"]), tuple(rows), int(page["total"]))


def watch_table(
    client: GatewayClient,
    job: str,
    renderer: Renderer,
    *,
    max_rows: int,
    interval: float,
    stop: Callable[[], bool],
) -> str:
    """Redraw the table whenever a new batch is committed, until the job ends or ``stop()``;
    the job's final state."""
    shown: tuple[int | None, int] | None = None
    while True:
        status = _retrying(lambda: client.job(job), stop)
        if status is None:
            return "INTERRUPTED"
        key = (status.get("committed_batch"), int(status.get("rows") or 0))
        if key != shown:
            snapshot = fetch_table(client, job, max_rows, stop)
            if snapshot is None:
                return "INTERRUPTED"
            renderer.show_table(snapshot, float(status.get("changes_per_second") or 0.0))
            shown = (snapshot.batch_id, snapshot.total)
        if status["state"] in TERMINAL:
            return str(status["state"])
        _sleep(interval, stop)


def follow_changelog(
    client: GatewayClient,
    job: str,
    renderer: Renderer,
    *,
    interval: float,
    stop: Callable[[], bool],
    start: str = "beginning",
    page_size: int = 1000,
) -> str:
    """Hand every committed change to ``renderer`` in order until the end of the stream (the job
    stopped or failed: its state is returned) or ``stop()``."""
    token: str | None = None
    while True:
        current = token
        page = _retrying(functools.partial(client.changelog_page, job, current, page_size, start), stop)
        if page is None:
            return "INTERRUPTED"
        changes = [
            ResultChange(int(item["pos"]), int(item["batch"]), str(item["op"]), tuple(item["row"]))
            for item in page["changes"]
        ]
        if changes:
            renderer.add_changes(changes, 0.0)
        if page["eos"]:
            return str(client.job(job)["state"])
        token = page["next_token"]
        if not changes:
            _sleep(interval, stop)


def _sleep(seconds: float, stop: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop():
        time.sleep(min(0.1, seconds))
