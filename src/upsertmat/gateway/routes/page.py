"""The status page: ``GET /`` (one HTML document, :mod:`upsertmat.gateway.page`), the one-time
link that opens it with a cookie (``POST /v1/login-links``), and the link itself
(``GET /login/{code}``)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse

from ..contract import LoginLink
from ..encoding import utc_time
from ..guard import COOKIE, PAGE_SESSION_SECONDS, PageSessions
from ..page import STATUS_PAGE
from .errors import error_body, errors


def router(pages: PageSessions) -> APIRouter:
    """The status page's routes, its logins kept in ``pages``."""
    routes = APIRouter()

    @routes.get("/", response_class=HTMLResponse, include_in_schema=False)
    def status_page() -> HTMLResponse:
        return HTMLResponse(STATUS_PAGE)

    @routes.get("/login/{code}", include_in_schema=False)
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

    @routes.post(
        "/v1/login-links",
        status_code=201,
        summary="a one-time link that opens the status page (sets a cookie; GET requests only)",
        responses=errors(),
    )
    def login_link() -> LoginLink:
        code, expires = pages.new_code()
        return LoginLink(path=f"/login/{code}", expires=utc_time(expires))

    return routes
