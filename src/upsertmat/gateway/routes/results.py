"""A job's results: a page of a table snapshot pinned to one committed batch, and the committed
changes after a changelog token (:mod:`upsertmat.gateway.paging`)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query, Response

from ..contract import CHANGELOG_TOKEN, TABLE_TOKEN, ChangelogPage, TablePage
from ..service import Gateway
from .common import JobId
from .errors import errors


def router(gateway: Gateway) -> APIRouter:
    """The result routes of ``gateway`` (its page and snapshot bounds in the schema)."""
    settings = gateway.settings
    routes = APIRouter()

    @routes.get(
        "/v1/jobs/{job}/result/table",
        summary="a page of the table, pinned to one committed batch",
        responses=errors(400, 404, 409, 410),
    )
    def table(
        job: JobId,
        token: str | None = Query(default=None, pattern=TABLE_TOKEN, description="next_token of a page"),
        page_size: int | None = Query(
            default=None, ge=1, le=settings.max_page_size, description="rows per page (a new snapshot)"
        ),
        max_rows: int | None = Query(
            default=None, ge=1, le=settings.max_snapshot_rows, description="rows a new snapshot holds"
        ),
    ) -> TablePage:
        return gateway.table_page(job, token, page_size, max_rows)

    @routes.get(
        "/v1/jobs/{job}/result/changelog",
        summary="the committed changes after a token",
        response_model=ChangelogPage,
        responses=errors(400, 404, 409, 410),
    )
    def changelog(
        job: JobId,
        token: str | None = Query(
            default=None, pattern=CHANGELOG_TOKEN, description="next_token, or the one before"
        ),
        max_changes: int | None = Query(
            default=None, ge=1, le=settings.max_page_size, description="changes per page"
        ),
        start: Literal["beginning", "now"] = Query(default="beginning", description="a new reader's start"),
        after: int | None = Query(
            default=None, ge=0, le=2**62, description="a new reader starts after this position (resume)"
        ),
    ) -> Response:
        body = gateway.changelog_page(job, token, max_changes, start, after)
        return Response(body, media_type="application/json")

    return routes
