"""The REST API (``/v1/...``), the status page and the metrics, on FastAPI.

Routes (every ``/v1`` one in the OpenAPI schema at ``/v1/openapi.json``, with its request and
response models from :mod:`.contract` and every status it can answer):

=======  ==========================================  ==============================================
GET      /                                           the status page (HTML, no outside assets)
GET      /login/{code}                               a one-time link: sets the page's cookie
GET      /metrics                                    Prometheus metrics (text format)
GET      /v1/info                                    version, master, bounds
POST     /v1/login-links                             a one-time link for the status page
POST     /v1/sessions                                open a session (its configuration layer)
GET      /v1/sessions/{session}                      a session's properties
POST     /v1/sessions/{session}/configure            set more properties
DELETE   /v1/sessions/{session}                      close it
POST     /v1/sessions/{session}/jobs                 submit a job file (YAML) or a compiled plan
GET      /v1/jobs                                    every job with its status
GET      /v1/jobs/{job}                              one job's status
DELETE   /v1/jobs/{job}                              forget a stopped or failed job
POST     /v1/jobs/{job}/stop                         stop at a micro-batch boundary
POST     /v1/jobs/{job}/restart                      start a stopped or failed job again
GET      /v1/jobs/{job}/explain                      what ``explain-plan`` prints
GET      /v1/jobs/{job}/result/table                 a page of a snapshot pinned to one batch
GET      /v1/jobs/{job}/result/changelog             the committed changes after a token
=======  ==========================================  ==============================================

Every error is JSON ``{"error": {"status": 4xx, "message": "..."}}``: a malformed request (400),
a missing or wrong credential (401), a path outside the data root or one of the gateway's own
(403), an unknown session, job, source directory or token (404), a method the path does not have (405,
with ``Allow``), a conflict with a job's state or another job (409), an expired or stale token
(410), a body over the bound (413), too many sessions or jobs (429). An unexpected exception is
a bug: 500 with the same shape, logged, and the service goes on.
"""

from __future__ import annotations

import hmac
import json
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Annotated, Any, Literal

from fastapi import FastAPI, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, RedirectResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from .. import __version__
from .contract import (
    CHANGELOG_TOKEN,
    JOB_ID,
    SESSION_ID,
    TABLE_TOKEN,
    Bounds,
    ChangelogPage,
    ConfigureRequest,
    ErrorBody,
    Info,
    JobDeleted,
    JobList,
    JobStatus,
    LoginLink,
    ResultsOnDelete,
    Session,
    SessionClosed,
    SessionRequest,
    SubmitRequest,
    TablePage,
)
from .metrics import GatewayMetrics
from .page import STATUS_PAGE
from .service import Gateway, RequestError, render_json, utc_time

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

SessionId = Annotated[str, Path(pattern=SESSION_ID, description="a session id (s-...)")]
JobId = Annotated[str, Path(pattern=JOB_ID, description="a job id (j-...)")]
COOKIE = "upsertmat_page"
LOGIN_SECONDS = 300.0
PAGE_SESSION_SECONDS = 12 * 3600.0

_DESCRIPTIONS = {
    400: "a malformed request: bad JSON, an unknown field or configuration key, a bad value or token",
    401: "a missing or wrong credential (Authorization: Bearer TOKEN)",
    403: "a path outside the data root, or one of the gateway's own files",
    404: "no such session, job, source directory, or snapshot or reader for the token",
    409: "the job's state does not allow it, or another job uses the same paths",
    410: "the token's snapshot expired, or the changelog token is older than the previous one",
    413: "the request body is over max-body-bytes",
    429: "too many sessions or running jobs",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route: every error status it can answer, with the error schema."""
    return {code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in sorted({401, *codes})}


class PortableJSON(JSONResponse):
    """Strict JSON (``allow_nan=False``); a body holding NaN or an infinity is sent with them as
    strings instead of failing (:func:`.service.portable`)."""

    def render(self, content: Any) -> bytes:
        return render_json(content)


def error_body(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    """The one error shape."""
    return JSONResponse(
        {"error": {"status": status, "message": message}}, status_code=status, headers=headers
    )


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


class PageSessions:
    """One-time login codes and the cookie sessions they open (in memory: a restart logs the
    page out). Codes live :data:`LOGIN_SECONDS` and work once; sessions :data:`PAGE_SESSION_SECONDS`."""

    def __init__(self) -> None:
        self.codes: dict[str, float] = {}
        self.sessions: dict[str, float] = {}

    def new_code(self) -> tuple[str, float]:
        self._expire()
        code = secrets.token_urlsafe(24)
        expires = time.time() + LOGIN_SECONDS
        self.codes[code] = expires
        return code, expires

    def redeem(self, code: str) -> str | None:
        """A new session for a valid unused code (which is used up), else None."""
        self._expire()
        if self.codes.pop(code, 0.0) <= time.time():
            return None
        session = secrets.token_urlsafe(32)
        self.sessions[session] = time.time() + PAGE_SESSION_SECONDS
        return session

    def valid(self, session: str) -> bool:
        return self.sessions.get(session, 0.0) > time.time()

    def _expire(self) -> None:
        now = time.time()
        for table in (self.codes, self.sessions):
            for key in [key for key, expires in table.items() if expires <= now]:
                del table[key]


def _cookie(headers: dict[str, str]) -> str | None:
    for part in headers.get("cookie", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == COOKIE:
            return value
    return None


class Guard:
    """ASGI middleware: the credential check and the body bound, before any route runs.

    With a token configured every request must carry it in ``Authorization: Bearer TOKEN`` (the
    scheme in any case; compared in constant time) — never in the address, where the paging
    ``token`` lives. The status page's own requests (GET only) may carry instead the cookie a
    one-time link (``/login/{code}``) set. The body is read here, up to ``max_body`` bytes: one
    byte more (by ``Content-Length`` or, for a chunked body, as it arrives) is a 413 before any
    route runs.
    """

    def __init__(self, app: ASGIApp, token: str | None, max_body: int, pages: PageSessions) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body
        self.pages = pages

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
        too_large = error_body(413, f"request body over {self.max_body} bytes (max-body-bytes)")
        length = headers.get("content-length")
        if length is not None and (
            not (length.isascii() and length.isdigit()) or int(length) > self.max_body
        ):
            await too_large(scope, receive, send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body:
                await too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _authorized(self, scope: Scope, headers: dict[str, str]) -> bool:
        assert self.token is not None
        if scope.get("path", "").startswith("/login/"):
            return True  # the one-time code is the credential
        scheme, _, given = headers.get("authorization", "").strip().partition(" ")
        if scheme.lower() == "bearer":
            return hmac.compare_digest(given.strip().encode(), self.token.encode())
        session = _cookie(headers)
        if session is not None and scope.get("method") in ("GET", "HEAD"):
            return self.pages.valid(session)
        return False


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """The methods the routes matching ``scope``'s path take (HEAD, implied by GET, left out)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    methods.discard("HEAD")
    return sorted(methods)


def create_app(gateway: Gateway, log: Callable[[str], None] = print) -> ASGIApp:
    """The ASGI application of ``gateway`` (FastAPI wrapped in :class:`Guard`)."""
    settings = gateway.settings
    pages = PageSessions()
    metrics = GatewayMetrics(gateway)
    app = FastAPI(
        title="upsertmat gateway",
        version=__version__,
        description="Jobs of the upsertmat pipeline, their status and their results. See docs/gateway.md.",
        openapi_url="/v1/openapi.json",
        default_response_class=PortableJSON,
        docs_url=None,  # FastAPI's docs pages load scripts from a CDN: the service serves no outside assets
        redoc_url=None,
    )
    app.openapi_version = "3.1.0"
    plain_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        """FastAPI's schema less its 422 answers: validation errors are 400 here."""
        if app.openapi_schema is None:
            schema = plain_openapi()
            for item in schema.get("paths", {}).values():
                for operation in item.values():
                    operation.get("responses", {}).pop("422", None)
            for name in ("HTTPValidationError", "ValidationError"):
                schema.get("components", {}).get("schemas", {}).pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.middleware("http")
    async def timed(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        begin = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        metrics.request(request.method, getattr(route, "path", "other"), response.status_code, begin)
        return response

    @app.exception_handler(RequestError)
    async def request_error(request: Request, error: RequestError) -> JSONResponse:
        return error_body(error.status, error.message)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, error: RequestValidationError) -> JSONResponse:
        return error_body(400, _validation_message(error))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> JSONResponse:
        headers = dict(error.headers or {})
        if error.status_code == 405:  # every method of the path, not only those of one route
            headers["Allow"] = ", ".join(allowed_methods(app, request.scope))
        return error_body(error.status_code, str(error.detail), headers)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, error: Exception) -> JSONResponse:
        log(f"internal error on {request.method} {request.url.path}: {type(error).__name__}: {error}")
        return error_body(500, "internal error (a bug; the gateway's log has the details)")

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def status_page() -> HTMLResponse:
        return HTMLResponse(STATUS_PAGE)

    @app.get("/login/{code}", include_in_schema=False)
    def login(code: str, request: Request) -> Response:
        session = pages.redeem(code)
        if session is None:
            return error_body(401, "this login link is unknown, used or expired: ask for a new one")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(
            COOKIE,
            session,
            max_age=int(PAGE_SESSION_SECONDS),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @app.get("/metrics", include_in_schema=False)
    def prometheus(request: Request) -> Response:
        body, content_type = metrics.render(request.headers.get("accept", ""))
        return Response(body, media_type=content_type)

    @app.get("/v1/info", summary="the gateway's version, master and bounds", responses=errors())
    def info() -> Info:
        return Info(
            version=__version__,
            master=settings.master,
            trigger_interval=settings.trigger_interval,
            tls=settings.tls,
            bounds=Bounds(
                max_body_bytes=settings.max_body_bytes,
                max_jobs=settings.max_jobs,
                max_sessions=settings.max_sessions,
                session_idle_seconds=settings.session_idle_seconds,
                snapshot_seconds=settings.snapshot_seconds,
                max_snapshot_rows=settings.max_snapshot_rows,
                max_snapshots=settings.max_snapshots,
                max_snapshot_bytes=settings.max_snapshot_bytes,
                max_readers=settings.max_readers,
                max_page_size=settings.max_page_size,
            ),
        )

    @app.post(
        "/v1/login-links",
        status_code=201,
        summary="a one-time link that opens the status page (sets a cookie; GET requests only)",
        responses=errors(),
    )
    def login_link() -> LoginLink:
        code, expires = pages.new_code()
        return LoginLink(path=f"/login/{code}", expires=utc_time(expires))

    def session_model(session_id: str) -> Session:
        record = gateway.session(session_id)
        return Session(session=record.id, properties=record.properties, created=utc_time(record.created))

    @app.post(
        "/v1/sessions",
        status_code=201,
        summary="open a session with its configuration layer",
        responses=errors(400, 413, 429),
    )
    def open_session(body: SessionRequest) -> Session:
        record = gateway.open_session(body.properties.layer())
        return session_model(record.id)

    @app.get("/v1/sessions/{session}", summary="a session's properties", responses=errors(400, 404))
    def get_session(session: SessionId) -> Session:
        return session_model(session)

    @app.post(
        "/v1/sessions/{session}/configure",
        summary="set properties of a session",
        responses=errors(400, 404, 413),
    )
    def configure(session: SessionId, body: ConfigureRequest) -> Session:
        gateway.configure_session(session, body.properties.layer())
        return session_model(session)

    @app.delete(
        "/v1/sessions/{session}",
        summary="close a session (its jobs keep running)",
        responses=errors(400, 404),
    )
    def close_session(session: SessionId) -> SessionClosed:
        gateway.close_session(session)
        return SessionClosed(session=session, closed=True)

    @app.post(
        "/v1/sessions/{session}/jobs",
        status_code=201,
        summary="submit a job file or a compiled plan",
        responses=errors(400, 403, 404, 409, 413, 429),
    )
    def submit(session: SessionId, body: SubmitRequest) -> JobStatus:
        kind, document = ("job", body.job) if body.job is not None else ("plan", json.dumps(body.plan))
        assert document is not None
        record = gateway.submit(session, kind, document, body.settings.layer())
        return gateway.status(record)

    @app.get("/v1/jobs", summary="every job with its status", responses=errors())
    def jobs() -> JobList:
        return JobList(jobs=[gateway.status(record) for record in gateway.registry.jobs()])

    @app.get(
        "/v1/jobs/{job}",
        summary="a job's status: state, batches, rows, changes/s, last error",
        responses=errors(400, 404),
    )
    def job(job: JobId) -> JobStatus:
        return gateway.status(gateway.job(job))

    @app.delete(
        "/v1/jobs/{job}",
        summary="forget a stopped or failed job; results=keep moves its directory to deleted/, "
        "results=delete removes it and drops an external sink's table",
        responses=errors(400, 404, 409),
    )
    def delete_job(
        job: JobId,
        results: Annotated[ResultsOnDelete, Query(description="keep or delete")] = ResultsOnDelete.KEEP,
    ) -> JobDeleted:
        kept = gateway.delete(job, results)
        return JobDeleted(id=job, deleted=True, results=results, kept_in=None if kept is None else str(kept))

    @app.post(
        "/v1/jobs/{job}/stop",
        summary="stop a job at a micro-batch boundary (no new batch starts)",
        responses=errors(400, 404, 409),
    )
    def stop(job: JobId) -> JobStatus:
        return gateway.status(gateway.stop(job))

    @app.post(
        "/v1/jobs/{job}/restart",
        summary="start a stopped or failed job again on its checkpoint",
        responses=errors(400, 404, 409, 429),
    )
    def restart(job: JobId) -> JobStatus:
        return gateway.status(gateway.restart(job))

    @app.get(
        "/v1/jobs/{job}/explain",
        response_class=PlainTextResponse,
        summary="the job's plan explained",
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            **{
                code: {
                    **item,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
                }
                for code, item in errors(400, 404).items()
            },
        },
    )
    def explain(job: JobId) -> PlainTextResponse:
        return PlainTextResponse(gateway.explain(job))

    @app.get(
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

    @app.get(
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

    return Guard(app, settings.token, settings.max_body_bytes, pages)
