"""A job's results, paged: table snapshots pinned to one committed batch, and the changelog of
committed batches behind tokens (the registry keeps both, so tokens survive a gateway restart).

Results are read from the job's sink: what committed batches left there, never a half-applied
batch (:mod:`upsertmat.sinks`). A table token is ``t-<10 hex>.<page>``, a changelog token
``c-<10 hex>.<n>``; the changelog accepts the current token and the previous one, whose page is
stored and served again byte for byte (Flink's retry rule). O(page) per request, plus the
snapshot's rows when one is taken.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

from ..jobs.model import JobSpec
from ..sinks import SinkError, read_changes, read_snapshot, snapshot_header
from .contract import Change, ChangelogPage, TablePage
from .encoding import render_json, utc_time
from .errors import Conflict, Gone, Invalid, NotFound
from .registry import JobRecord, Registry
from .settings import GatewaySettings

TOKEN = re.compile(r"([tc]-[0-9a-f]{10})\.([0-9]{1,9})")


def split_token(token: str, prefix: str) -> tuple[str, int]:
    """``("c-…", 3)`` of ``"c-….3"``; Invalid for anything else: the id is the prefix and ten
    hexadecimal digits, the page number ASCII digits (at most nine)."""
    match = TOKEN.fullmatch(token)
    if match is None or not token.startswith(prefix):
        raise Invalid(f"malformed token {token!r} (expected {prefix}<10 hex digits>.<page number>)")
    return match.group(1), int(match.group(2))


class ResultPages:
    """The table and changelog pages of one gateway's jobs.

    ``job`` finds a job's record (NotFound otherwise), ``resolve`` its spec, ``ended`` says
    whether a record's job has stopped or failed."""

    def __init__(
        self,
        registry: Registry,
        settings: GatewaySettings,
        job: Callable[[str], JobRecord],
        resolve: Callable[[JobRecord], JobSpec],
        ended: Callable[[JobRecord], bool],
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.job = job
        self.resolve = resolve
        self.ended = ended
        self._cursor_locks = [threading.Lock() for _ in range(64)]  # one token served at a time

    def page_size(self, size: int | None) -> int:
        """``size`` checked against the bounds (Invalid), or the default."""
        if size is None:
            return self.settings.default_page_size
        if not 1 <= size <= self.settings.max_page_size:
            raise Invalid(f"page size must be 1..{self.settings.max_page_size}, got {size}")
        return size

    def table_page(
        self, job_id: str, token: str | None, page_size: int | None, max_rows: int | None = None
    ) -> TablePage:
        """A page of a table result set pinned to one committed batch.

        Without a token: a new snapshot of the table as the last committed batch left it (at most
        ``max_snapshot_rows`` rows held, fewer with ``max_rows`` or when the snapshot bytes bound
        cuts it), page 0. With ``<snapshot>.<page>``: that page of the same snapshot, whatever the
        job committed since; Gone once the snapshot has expired, NotFound once it is gone
        (dropped by expiry or the bounds: the registry no longer knows it) or for a page it does
        not have.
        """
        record = self.job(job_id)
        settings = self.settings
        if token is None:
            size = self.page_size(page_size)
            job = self.resolve(record)
            try:
                held = min(max_rows or settings.max_snapshot_rows, settings.max_snapshot_rows)
                found = read_snapshot(job.sink.url, job.sink.table, job.primary_key, held)
            except SinkError as error:
                raise Conflict(str(error)) from None
            snapshot = self.registry.add_snapshot(
                job_id,
                found.batch_id,
                found.columns,
                found.rows,
                found.total,
                size,
                settings.snapshot_seconds,
                settings.max_snapshots,
                settings.max_snapshot_bytes,
            )
            page = 0
        else:
            snapshot_id, page = split_token(token, "t-")
            found_snapshot = self.registry.snapshot(snapshot_id)
            if found_snapshot is None or found_snapshot.job_id != job_id:
                raise NotFound(
                    f"no snapshot for table token {token!r} (never issued, or expired and dropped): "
                    "start again without a token"
                )
            if found_snapshot.expires <= time.time():
                raise Gone(f"the snapshot of token {token!r} expired: start again without a token")
            snapshot = found_snapshot
            pages = max(1, -(-snapshot.held // snapshot.page_size))
            if page >= pages:
                has = "1 page" if pages == 1 else f"{pages} pages"
                raise NotFound(f"token {token!r} names page {page}; the snapshot has {has}, from 0")
        pages = max(1, -(-snapshot.held // snapshot.page_size))
        rows = self.registry.snapshot_page(snapshot.id, page)
        if rows is None:
            if snapshot.held:
                raise NotFound(f"the snapshot of token {snapshot.id}.{page} is gone: start again")
            rows = []
        return TablePage(
            job=job_id,
            snapshot=snapshot.id,
            batch=snapshot.batch_id,
            columns=list(snapshot.columns),
            rows=rows,
            page=page,
            pages=pages,
            total=snapshot.total,
            held=snapshot.held,
            expires=utc_time(snapshot.expires),
            token=f"{snapshot.id}.{page}",
            next_token=f"{snapshot.id}.{page + 1}" if page + 1 < pages else None,
        )

    def changelog_page(
        self,
        job_id: str,
        token: str | None,
        limit: int | None,
        start: str = "beginning",
        after: int | None = None,
    ) -> bytes:
        """The committed changes after a token, in order, as the JSON body to send (Flink's rule:
        the current token or the previous one). The body served for a token is stored: asking
        again for it (the previous token, or the current one while another request serves it)
        returns exactly those bytes, whatever was committed, stopped or restarted since. ``eos``
        once the job has stopped or failed and every change has been served. A new reader (no
        token) starts at the first change, after position ``after``, or with ``start="now"``
        after the last one committed."""
        record = self.job(job_id)
        job = self.resolve(record)
        size = self.page_size(limit)
        if token is None:
            first = 0 if after is None else after
            if after is None and start == "now":
                found_now = snapshot_header(job.sink.url, job.sink.table, job.primary_key)
                first = 0 if found_now is None else found_now.changes_pos
            cursor_id = self.registry.add_cursor(job_id, first, self.settings.max_readers)
            number = 0
        else:
            cursor_id, number = split_token(token, "c-")
        with self._cursor_locks[hash(cursor_id) % len(self._cursor_locks)]:
            found = self.registry.cursor(cursor_id)
            if found is None or found[0] != job_id:
                raise NotFound(
                    f"no reader for changelog token {token!r} (never issued, or dropped): start again "
                    "without a token, or with after=<the last position you kept>"
                )
            current = found[1]
            page = self.registry.cursor_page(cursor_id, number)
            if page is None or number not in (current, current - 1):
                raise Gone(
                    f"changelog token {token!r} is stale: the gateway accepts the current token ({cursor_id}."
                    f"{current}) or the previous one"
                )
            first_pos, stored = page
            if stored is not None:
                self.registry.touch_cursor(cursor_id)
                return stored
            ended = self.ended(self.job(job_id))  # read before the changes: none after it
            try:
                changes = read_changes(job.sink.url, job.sink.table, first_pos, size)
            except SinkError as error:
                raise Conflict(str(error)) from None
            eos = ended and not changes
            body = ChangelogPage(
                job=job_id,
                changes=[Change(pos=c.pos, batch=c.batch_id, op=c.op, row=list(c.row)) for c in changes],  # type: ignore[arg-type]
                token=f"{cursor_id}.{number}",
                next_token=None if eos else f"{cursor_id}.{number + 1}",
                eos=eos,
            )
            rendered = render_json(body.model_dump(mode="json"))
            return self.registry.serve_page(
                cursor_id, number, changes[-1].pos if changes else first_pos, rendered
            )
