"""Following a gateway job's results with the same renderers as an embedded run.

- :func:`fetch_table`: every page of ONE snapshot (one committed batch), following
  ``next_token``.
- :func:`follow_changelog`: the changelog from the start, from now, after a position or from a
  token, page after page, until the end of the stream (``follow``) or the first empty page.

Every request goes through :func:`retrying`: a connection error or a 5xx is asked again with the
same arguments (the same token: the gateway answers the current and the previous token, and the
previous one returns exactly the page it returned before, so a retry never loses or repeats a
change) after a backoff (0.25 s doubling to 5 s), for up to ``patience`` seconds — long enough
to ride out a gateway restart. Then :class:`GaveUp` says since when and which token to resume
from. O(rows or changes).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..jobs.results import ResultChange, Snapshot
from .http import GatewayClient, GatewayError
from .render import Renderer

TERMINAL = ("STOPPED", "FAILED")
FIRST_BACKOFF = 0.25
MAX_BACKOFF = 5.0
T = TypeVar("T")


class GaveUp(Exception):
    """Retries exhausted: ``error`` is the last failure, ``token`` where to resume (if known)."""

    def __init__(self, error: GatewayError, seconds: float, token: str | None) -> None:
        super().__init__(error.message)
        self.error = error
        self.seconds = seconds
        self.token = token


@dataclass
class Retry:
    """How long to keep asking (``patience`` seconds) and what ``stop()`` says."""

    stop: Callable[[], bool]
    patience: float = 120.0
    say: Callable[[str], None] = lambda text: None


def retrying(call: Callable[[], T], retry: Retry, token: str | None = None) -> T | None:
    """``call()``; asked again after a connection error or a 5xx, with a doubling backoff, for
    up to ``retry.patience`` seconds (then GaveUp); None when ``retry.stop()`` turns true. A 4xx
    is raised at once (asking again would get the same answer)."""
    begin = time.monotonic()
    delay = FIRST_BACKOFF
    warned = False
    while not retry.stop():
        try:
            return call()
        except GatewayError as error:
            if not error.retryable:
                raise
            waited = time.monotonic() - begin
            if waited + delay > retry.patience:
                raise GaveUp(error, waited, token) from None
            if not warned:
                retry.say(f"{error.message}; retrying for up to {retry.patience:.0f} s")
                warned = True
            _sleep(delay, retry.stop)
            delay = min(delay * 2, MAX_BACKOFF)
    return None


def fetch_table(client: GatewayClient, job: str, max_rows: int, retry: Retry) -> Snapshot | None:
    """The job's table as one committed batch left it (at most ``max_rows`` rows), all pages."""
    page = retrying(lambda: client.table_page(job, max_rows=max_rows, page_size=min(max_rows, 10_000)), retry)
    if page is None:
        return None
    rows = [tuple(row) for row in page.rows]
    while page.next_token is not None:
        token = page.next_token
        following = retrying(functools.partial(client.table_page, job, token=token), retry, token)
        if following is None:
            return None
        page = following
        rows.extend(tuple(row) for row in page.rows)
    return Snapshot(page.batch, tuple(page.columns), tuple(rows), page.total)


def watch_table(
    client: GatewayClient,
    job: str,
    renderer: Renderer,
    *,
    max_rows: int,
    interval: float,
    retry: Retry,
    follow: bool = True,
) -> str:
    """Draw the table; with ``follow``, redraw it whenever a new batch is committed until the job
    ends or ``retry.stop()``. The job's last state seen (``INTERRUPTED`` when stopped)."""
    shown: tuple[int | None, int] | None = None
    while True:
        status = retrying(lambda: client.job(job), retry)
        if status is None:
            return "INTERRUPTED"
        key = (status.committed_batch, int(status.rows or 0))
        if key != shown:
            snapshot = fetch_table(client, job, max_rows, retry)
            if snapshot is None:
                return "INTERRUPTED"
            renderer.show_table(snapshot, status.changes_per_second)
            shown = (snapshot.batch_id, snapshot.total)
        if status.state.value in TERMINAL or not follow:
            return status.state.value
        _sleep(interval, retry.stop)


@dataclass
class Position:
    """Where a changelog reader is: the token to ask next (None: a new reader) and how a new
    reader starts (``start``, or after position ``after``)."""

    token: str | None = None
    start: str = "beginning"
    after: int | None = None


def follow_changelog(
    client: GatewayClient,
    job: str,
    renderer: Renderer,
    *,
    interval: float,
    retry: Retry,
    position: Position | None = None,
    page_size: int = 1000,
    follow: bool = True,
) -> str:
    """Hand every committed change to ``renderer`` in order until the end of the stream (the job
    stopped or failed: its state is returned), the first empty page without ``follow`` (the
    job's state), or ``retry.stop()`` (``INTERRUPTED``). ``position.token`` is kept current, so a
    caller can say where to resume."""
    where = position or Position()
    while True:
        current = where.token
        page = retrying(
            functools.partial(client.changelog_page, job, current, page_size, where.start, where.after),
            retry,
            current,
        )
        if page is None:
            return "INTERRUPTED"
        changes = [ResultChange(item.pos, item.batch, item.op, tuple(item.row)) for item in page.changes]
        if changes:
            renderer.add_changes(changes, 0.0)
        if page.eos or (not changes and not follow):
            status = retrying(lambda: client.job(job), retry, page.next_token)
            return "INTERRUPTED" if status is None else status.state.value
        where.token = page.next_token
        if not changes:
            _sleep(interval, retry.stop)


def _sleep(seconds: float, stop: Callable[[], bool]) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop():
        time.sleep(min(0.1, seconds))
