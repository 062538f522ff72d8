"""What runs before any route: the credential check, the request body bound, and the status
page's one-time logins and cookie sessions.

With a token configured every request must carry it in ``Authorization: Bearer TOKEN`` (one
such header, one space, the scheme in any case; compared in constant time) — never in the
address, where the paging ``token`` lives. The status page's own requests (GET only) may carry
instead the cookie a one-time link (``/login/{code}``) set. The body is read here, up to
``max_body`` bytes: one byte more (by ``Content-Length`` or, for a chunked body, as it arrives)
is a 413 before any route runs.
"""

from __future__ import annotations

import hmac
import re
import secrets
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from .routes.errors import error_body

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "upsertmat_page"
WRONG = "missing or wrong token (Authorization: Bearer TOKEN)"
_BEARER = re.compile(r"[Bb][Ee][Aa][Rr][Ee][Rr] ([^\s]+)")
LOGIN_SECONDS = 300.0
PAGE_SESSION_SECONDS = 12 * 3600.0


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
    """ASGI middleware: the credential check and the body bound, before any route runs."""

    def __init__(self, app: ASGIApp, token: str | None, max_body: int, pages: PageSessions) -> None:
        self.app = app
        self.token = token
        self.max_body = max_body
        self.pages = pages

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        pairs = [(key.decode("latin-1").lower(), value.decode("latin-1")) for key, value in scope["headers"]]
        headers = dict(pairs)
        refused = None if self.token is None else self._refusal(scope, headers, pairs)
        if refused is not None:
            await error_body(401, refused)(scope, receive, send)
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

    def _refusal(self, scope: Scope, headers: dict[str, str], pairs: list[tuple[str, str]]) -> str | None:
        """Why the request is not authenticated (the 401's message), or None if it is.

        At most one ``Authorization`` header. A Bearer one decides alone: ``Bearer <token>``, the
        scheme in any case and one space (what every client sends; anything else is more likely
        a header mangled on its way than a variant worth reading), the token compared in
        constant time. A header of another scheme (a proxy's Basic credentials passed on) is not
        a credential here: the page's cookie may still open a GET."""
        assert self.token is not None
        if scope.get("path", "").startswith("/login/"):
            return None  # the one-time code is the credential
        given = [value for name, value in pairs if name == "authorization"]
        if len(given) > 1:
            return "more than one Authorization header: send one (Authorization: Bearer TOKEN)"
        if given and given[0][:6].lower() == "bearer":
            found = _BEARER.fullmatch(given[0])
            if found is None:
                return "malformed Authorization header: expected 'Bearer TOKEN' (one space, no other)"
            if hmac.compare_digest(found.group(1).encode(), self.token.encode()):
                return None
            return WRONG
        session = _cookie(headers)
        if session is not None and scope.get("method") in ("GET", "HEAD") and self.pages.valid(session):
            return None
        return WRONG
