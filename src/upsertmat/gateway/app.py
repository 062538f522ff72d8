"""The REST API (``/v1/...``) and the status page, on FastAPI.

Routes (every one documented in the OpenAPI schema at ``/v1/openapi.json``):

=======  ==========================================  ==============================================
GET      /                                           the status page (HTML, no outside assets)
GET      /v1/info                                    version, master, bounds
POST     /v1/sessions                                open a session (its configuration layer)
GET      /v1/sessions/{session}                      a session's properties
POST     /v1/sessions/{session}/configure            set more properties
DELETE   /v1/sessions/{session}                      close it
POST     /v1/sessions/{session}/jobs                 submit a job file (YAML) or a compiled plan
GET      /v1/jobs                                    every job with its status
GET      /v1/jobs/{job}                              one job's status
POST     /v1/jobs/{job}/stop                         stop at a micro-batch boundary
GET      /v1/jobs/{job}/explain                      what ``explain-plan`` prints
GET      /v1/jobs/{job}/result/table                 a page of a snapshot pinned to one batch
GET      /v1/jobs/{job}/result/changelog             the committed changes after a token
=======  ==========================================  ==============================================

Every error is JSON ``{"error": {"status": 4xx, "message": "..."}}``: malformed JSON or an
unknown field (400), a missing or wrong token (401), a path outside the data root (403), an
unknown session, job (404), a conflict (409), an expired or stale token (410), a body over the
bound (413), too many sessions or jobs (429). An unexpected exception is a bug: 500 with the same
shape, logged, and the service goes on.
"""

from __future__ import annotations

import hmac
import json
import math
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any, Literal

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from .page import STATUS_PAGE
from .service import Gateway, RequestError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

Value = str | int | float | bool | None


class Strict(BaseModel):
    """Request bodies refuse unknown fields."""

    model_config = ConfigDict(extra="forbid")


class SessionRequest(Strict):
    """``POST /v1/sessions``: the session's configuration layer (flat or nested keys)."""

    properties: dict[str, Any] = Field(
        default_factory=dict,
        description="configuration keys, e.g. table.exec.sink.upsert-materialize-strategy.type: MAP",
    )


class ConfigureRequest(Strict):
    """``POST /v1/sessions/{session}/configure``: properties set on top of the session's."""

    properties: dict[str, Any]


class SubmitRequest(Strict):
    """``POST /v1/sessions/{session}/jobs``: exactly one of ``job`` (a job file's YAML text) and
    ``plan`` (a compiled plan, JSON), plus per-request configuration keys."""

    job: str | None = Field(default=None, description="the job file's YAML text")
    plan: dict[str, Any] | None = Field(default=None, description="a compiled plan (upsertmat compile-plan)")
    settings: dict[str, Any] = Field(default_factory=dict, description="per-request configuration keys")


def portable(value: Any) -> Any:
    """``value`` with non-finite floats as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
    (JSON has no such numbers; a sink's DOUBLE column can hold them). O(size)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [portable(item) for item in value]
    return value


class PortableJSON(JSONResponse):
    """Strict JSON (``allow_nan=False``); a body holding NaN or an infinity is sent with them as
    strings (:func:`portable`) instead of failing."""

    def render(self, content: Any) -> bytes:
        try:
            return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        except ValueError:
            return json.dumps(portable(content), ensure_ascii=False, separators=(",", ":")).encode()


def error_body(status: int, message: str) -> JSONResponse:
    """The one error shape."""
    return JSONResponse({"error": {"status": status, "message": message}}, status_code=status)


def _validation_message(error: RequestValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(step) for step in item.get("loc", ()) if step != "body")
        kind = item.get("type", "")
        if kind == "extra_forbidden":
            parts.append(f"unknown field {where!r}")
        elif kind == "json_invalid":
            parts.append(f"malformed JSON: {item.get('ctx', {}).get('error', item.get('msg'))}")
        else:
            parts.append(f"{where or 'the body'}: {item.get('msg')}")
    return "; ".join(parts) or "bad request"


class Guard:
    """ASGI middleware: the token check and the body bound, before any route runs.

    With a token configured every request must carry it (``Authorization: Bearer TOKEN``, or
    ``?token=TOKEN`` for the status page and a browser), compared in constant time. A body larger
    than ``max_body`` bytes is refused with 413 as soon as its ``Content-Length`` or its bytes
    say so (a chunked body is counted as it arrives).
    """

    def __init__(self, app: ASGIApp, token: str | None, max_body: int) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
        if self.token is not None and not self._authorized(scope, headers):
            await error_body(401, "missing or wrong token (Authorization: Bearer TOKEN)")(
                scope, receive, send
            )
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await error_body(413, f"request body over {self.max_body} bytes (max-body-bytes)")(
                scope, receive, send
            )
            return
        seen = 0
        too_large = False

        async def counted() -> Message:
            nonlocal seen, too_large
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_body:
                    too_large = True
                    raise _BodyTooLarge
            return message

        try:
            await self.app(scope, counted, send)
        except _BodyTooLarge:
            await error_body(413, f"request body over {self.max_body} bytes (max-body-bytes)")(
                scope, receive, send
            )

    def _authorized(self, scope: Scope, headers: dict[str, str]) -> bool:
        assert self.token is not None
        given = headers.get("authorization", "")
        if given.startswith("Bearer "):
            return hmac.compare_digest(given[len("Bearer ") :].encode(), self.token.encode())
        query = scope.get("query_string", b"").decode("latin-1")
        for pair in query.split("&"):
            key, _, value = pair.partition("=")
            if key == "token":
                return hmac.compare_digest(value.encode(), self.token.encode())
        return False


class _BodyTooLarge(Exception):
    """Raised while reading a body past the bound."""


def create_app(gateway: Gateway, log: Callable[[str], None] = print) -> ASGIApp:
    """The ASGI application of ``gateway`` (FastAPI wrapped in :class:`Guard`)."""
    settings = gateway.settings
    app = FastAPI(
        title="upsertmat gateway",
        version=__version__,
        description="Jobs of the upsertmat pipeline, their status and their results. See docs/gateway.md.",
        openapi_url="/v1/openapi.json",
        default_response_class=PortableJSON,
        docs_url=None,  # FastAPI's docs pages load scripts from a CDN: the service serves no outside assets
        redoc_url=None,
    )

    @app.exception_handler(RequestError)
    async def request_error(request: Request, error: RequestError) -> JSONResponse:
        return error_body(error.status, error.message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return error_body(400, _validation_message(error))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        return error_body(error.status_code, str(error.detail))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        log(f"internal error on {request.method} {request.url.path}: {type(error).__name__}: {error}")
        return error_body(500, "internal error (a bug; the gateway's log has the details)")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def status_page() -> HTMLResponse:
        return HTMLResponse(STATUS_PAGE)

    @app.get("/v1/info", summary="the gateway's version, master and bounds")
    def info() -> dict[str, Any]:
        return {
            "version": __version__,
            "master": settings.master,
            "trigger_interval": settings.trigger_interval,
            "bounds": {
                "max_body_bytes": settings.max_body_bytes,
                "max_jobs": settings.max_jobs,
                "max_sessions": settings.max_sessions,
                "session_idle_seconds": settings.session_idle_seconds,
                "snapshot_seconds": settings.snapshot_seconds,
                "max_snapshot_rows": settings.max_snapshot_rows,
                "max_page_size": settings.max_page_size,
            },
        }

    @app.post("/v1/sessions", status_code=201, summary="open a session with its configuration layer")
    def open_session(body: SessionRequest) -> dict[str, Any]:
        record = gateway.open_session(body.properties)
        return {"session": record.id, "properties": record.properties}

    @app.get("/v1/sessions/{session}", summary="a session's properties")
    def get_session(session: str) -> dict[str, Any]:
        record = gateway.session(session)
        return {"session": record.id, "properties": record.properties, "created": record.created}

    @app.post("/v1/sessions/{session}/configure", summary="set properties of a session")
    def configure(session: str, body: ConfigureRequest) -> dict[str, Any]:
        record = gateway.configure_session(session, body.properties)
        return {"session": record.id, "properties": record.properties}

    @app.delete("/v1/sessions/{session}", summary="close a session (its jobs keep running)")
    def close_session(session: str) -> dict[str, Any]:
        gateway.close_session(session)
        return {"session": session, "closed": True}

    @app.post("/v1/sessions/{session}/jobs", status_code=201, summary="submit a job file or a compiled plan")
    def submit(session: str, body: SubmitRequest) -> dict[str, Any]:
        if (body.job is None) == (body.plan is None):
            raise RequestError(400, "give exactly one of 'job' (YAML text) and 'plan' (a compiled plan)")
        kind, document = ("job", body.job) if body.job is not None else ("plan", json.dumps(body.plan))
        assert document is not None
        record = gateway.submit(session, kind, document, body.settings)
        return gateway.status(record)

    @app.get("/v1/jobs", summary="every job with its status")
    def jobs() -> dict[str, Any]:
        return {"jobs": [gateway.status(record) for record in gateway.registry.jobs()]}

    @app.get("/v1/jobs/{job}", summary="a job's status: state, batches, rows, changes/s, last error")
    def job(job: str) -> dict[str, Any]:
        return gateway.status(gateway.job(job))

    @app.post("/v1/jobs/{job}/stop", summary="stop a job at its next micro-batch boundary")
    def stop(job: str) -> dict[str, Any]:
        return gateway.status(gateway.stop(job))

    @app.get("/v1/jobs/{job}/explain", response_class=PlainTextResponse, summary="the job's plan explained")
    def explain(job: str) -> PlainTextResponse:
        return PlainTextResponse(gateway.explain(job))

    @app.get("/v1/jobs/{job}/result/table", summary="a page of the table, pinned to one committed batch")
    def table(
        job: str,
        token: str | None = Query(default=None, max_length=64, description="next_token of the previous page"),
        page_size: int | None = Query(default=None, description="rows per page (a new snapshot only)"),
        max_rows: int | None = Query(default=None, ge=1, description="rows a new snapshot holds"),
    ) -> dict[str, Any]:
        return gateway.table_page(job, token, page_size, max_rows)

    @app.get("/v1/jobs/{job}/result/changelog", summary="the committed changes after a token")
    def changelog(
        job: str,
        token: str | None = Query(default=None, max_length=64, description="next_token, or the one before"),
        max_changes: int | None = Query(default=None, description="changes per page"),
        start: Literal["beginning", "now"] = Query(default="beginning", description="a new reader's start"),
    ) -> dict[str, Any]:
        return gateway.changelog_page(job, token, max_changes, start)

    return Guard(app, settings.token, settings.max_body_bytes)
