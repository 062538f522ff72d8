"""Errors over HTTP, in ONE place: each domain error's status (:data:`STATUS`), the one error
body ``{"error": {"status": 4xx, "message": "..."}}``, the statuses a route documents in the
OpenAPI schema (:func:`errors`), and the exception handlers that answer them.

A malformed request (400), a missing or wrong credential (401, the guard's), a path outside the
data root or one of the gateway's own (403), an unknown session, job, source directory or token
(404), a method the path does not have (405, with ``Allow``), a conflict with a job's state,
another job or the sink (409), an expired or stale token (410), a body over the bound (413, the
guard's), too many sessions or jobs (429). An unexpected exception is a bug: 500 with the same
shape, logged, and the service goes on.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from ..contract import ErrorBody
from ..errors import Conflict, Forbidden, Gone, Invalid, NotFound, OverBound, Refusal

STATUS: Final[dict[type[Refusal], int]] = {
    Invalid: 400,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Gone: 410,
    OverBound: 429,
}
"""The HTTP status of each domain error (:mod:`upsertmat.gateway.errors`)."""

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


def status_of(error: Refusal) -> int:
    """The HTTP status a domain error is answered with (its class's, or its nearest base's)."""
    for kind in type(error).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return 400


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses`` of a route: every error status it can answer, with the error schema."""
    return {code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in sorted({401, *codes})}


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


def allowed_methods(app: FastAPI, scope: MutableMapping[str, Any]) -> list[str]:
    """The methods the routes matching ``scope``'s path take (HEAD, implied by GET, left out)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(scope)
        if match is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    methods.discard("HEAD")
    return sorted(methods)


def install(app: FastAPI, log: Callable[[str], None]) -> None:
    """Answer every error of ``app`` in the one shape: domain errors with their status,
    validation errors with 400, Starlette's own (404 for an unknown path, 405 with ``Allow``),
    and anything else as a logged 500."""

    @app.exception_handler(Refusal)
    async def refused(request: Request, error: Refusal) -> JSONResponse:
        return error_body(status_of(error), error.message)

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
