"""The ASGI application: the routers over the domain service, the status page and the metrics,
on FastAPI, behind the credential guard (:mod:`.guard`).

Routes (every ``/v1`` one in the OpenAPI schema at ``/v1/openapi.json``, with its request and
response models from :mod:`.contract` and every status it can answer; one router module per
resource in :mod:`.routes`):

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
GET      /v1/jobs/{job}/history                      its last batches (the status page's plots)
=======  ==========================================  ==============================================

Every error is JSON ``{"error": {"status": 4xx, "message": "..."}}`` (:mod:`.routes.errors`,
where the domain errors get their statuses).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response

from .. import __version__
from .guard import ASGIApp, Guard, PageSessions
from .metrics import GatewayMetrics
from .routes import info, jobs, metrics, page, results, sessions
from .routes.common import PortableJSON
from .routes.errors import install
from .service import Gateway


def _without_422(app: FastAPI) -> None:
    """Serve FastAPI's schema less its 422 answers: validation errors are 400 here."""
    plain_openapi = app.openapi

    def openapi() -> dict[str, Any]:
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


def create_app(gateway: Gateway, log: Callable[[str], None] = print) -> ASGIApp:
    """The ASGI application of ``gateway`` (FastAPI wrapped in :class:`.guard.Guard`)."""
    settings = gateway.settings
    pages = PageSessions()
    counted = GatewayMetrics(gateway)
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
    _without_422(app)

    @app.middleware("http")
    async def timed(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        begin = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        counted.request(request.method, getattr(route, "path", "other"), response.status_code, begin)
        return response

    install(app, log)
    for router in (
        info.router(settings),
        page.router(pages),
        sessions.router(gateway),
        jobs.router(gateway),
        results.router(gateway),
        metrics.router(counted, gateway),
    ):
        app.include_router(router)
    return Guard(app, settings.token, settings.max_body_bytes, pages)
