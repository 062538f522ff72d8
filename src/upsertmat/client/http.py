"""The gateway's HTTP client (httpx): one method per endpoint, answers parsed into the contract's
models (:mod:`upsertmat.gateway.contract`), errors as :class:`GatewayError`.

A 4xx/5xx answer becomes ``GatewayError(status, message)`` with the gateway's own message; a
connection that fails (refused, reset, timed out) becomes ``GatewayError(0, ...)``. Nothing is
retried here: :func:`upsertmat.client.follow.retrying` retries what is safe to ask again.
O(1) per call apart from the body.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel, ValidationError

from ..gateway.contract import (
    ChangelogPage,
    Info,
    JobDeleted,
    JobHistory,
    JobList,
    JobStatus,
    LoginLink,
    ResultsOnDelete,
    Session,
    TablePage,
)

Model = TypeVar("Model", bound=BaseModel)
DEFAULT_URL = "http://127.0.0.1:8083"
ADDRESS_FILE = "gateway.json"


class GatewayError(Exception):
    """A refused request (``status`` 4xx/5xx) or an unreachable gateway (``status`` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    @property
    def retryable(self) -> bool:
        """True for what asking again may cure: no connection, or a 5xx."""
        return self.status == 0 or self.status >= 500


class BadAddress(ValueError):
    """A gateway address that is not an http(s) URL, or an unreadable ``gateway.json``."""


def check_url(url: str) -> str:
    """``url`` without a trailing slash; BadAddress unless it is ``http(s)://HOST[:PORT]``."""
    parts = urlsplit(url.strip())
    try:
        port = parts.port
    except ValueError:
        raise BadAddress(f"not a gateway URL: {url!r} (a bad port)") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        raise BadAddress(f"not a gateway URL: {url!r} (expected http://HOST:PORT or https://HOST:PORT)")
    del port
    return url.strip().rstrip("/")


def address_of(data_root: Path) -> str:
    """The URL a running gateway wrote into ``<data_root>/gateway.json``; BadAddress if none."""
    path = data_root / ADDRESS_FILE
    try:
        return check_url(str(json.loads(path.read_text(encoding="utf-8"))["url"]))
    except FileNotFoundError:
        raise BadAddress(f"no gateway runs on {data_root} ({path} does not exist)") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise BadAddress(f"cannot read {path}: {error}") from None


class GatewayClient:
    """A client of one gateway (``url`` like ``http://127.0.0.1:8083``), with its token if any.
    ``cafile``: a CA certificate (PEM) to trust for an ``https`` gateway; ``rediscover``: where
    to find the address again after a connection failure (``gateway.json`` of a data root)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        timeout: float = 30.0,
        cafile: Path | None = None,
        rediscover: Callable[[], str] | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = check_url(url)
        self.rediscover = rediscover
        verify: ssl.SSLContext | bool = True
        if cafile is not None:
            verify = ssl.create_default_context(cafile=str(cafile))
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, verify=verify)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            failed = self.url
            self._rediscover()
            raise GatewayError(0, f"cannot reach the gateway at {failed}: {error}") from None
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200] or response.reason_phrase
            raise GatewayError(response.status_code, str(message))
        return response

    def _rediscover(self) -> None:
        """After a connection failure: the address again from ``rediscover`` (a gateway started
        again on port 0 listens elsewhere; its ``gateway.json`` says where), for the next call."""
        if self.rediscover is None:
            return
        try:
            url = check_url(self.rediscover())
        except BadAddress:
            return  # not running (yet): keep the old address; the caller retries
        if url != self.url:
            self.url = url
            self.http.base_url = httpx.URL(url)

    def _call(self, model: type[Model], method: str, path: str, **kwargs: Any) -> Model:
        response = self._send(method, path, **kwargs)
        try:
            return model.model_validate_json(response.content)
        except ValidationError as error:
            raise GatewayError(
                response.status_code,
                f"the gateway's answer to {method} {path} does not fit the contract: {error}",
            ) from None

    def info(self) -> Info:
        return self._call(Info, "GET", "/v1/info")

    def open_session(self, properties: dict[str, Any] | None = None) -> str:
        return self._call(Session, "POST", "/v1/sessions", json={"properties": properties or {}}).session

    def configure(self, session: str, properties: dict[str, Any]) -> Session:
        return self._call(
            Session, "POST", f"/v1/sessions/{session}/configure", json={"properties": properties}
        )

    def close_session(self, session: str) -> None:
        self._send("DELETE", f"/v1/sessions/{session}")

    def submit(
        self,
        session: str,
        *,
        job: str | None = None,
        plan: dict[str, Any] | None = None,
        settings: dict[str, Any] | None = None,
    ) -> JobStatus:
        body: dict[str, Any] = {"settings": settings or {}}
        if job is not None:
            body["job"] = job
        if plan is not None:
            body["plan"] = plan
        return self._call(JobStatus, "POST", f"/v1/sessions/{session}/jobs", json=body)

    def jobs(self) -> list[JobStatus]:
        return self._call(JobList, "GET", "/v1/jobs").jobs

    def job(self, job: str) -> JobStatus:
        return self._call(JobStatus, "GET", f"/v1/jobs/{job}")

    def stop(self, job: str) -> JobStatus:
        return self._call(JobStatus, "POST", f"/v1/jobs/{job}/stop")

    def restart(self, job: str) -> JobStatus:
        return self._call(JobStatus, "POST", f"/v1/jobs/{job}/restart")

    def delete(self, job: str, results: ResultsOnDelete = ResultsOnDelete.KEEP) -> JobDeleted:
        return self._call(JobDeleted, "DELETE", f"/v1/jobs/{job}", params={"results": results.value})

    def history(self, job: str) -> JobHistory:
        """The job's last batches in the gateway's process (what the status page plots)."""
        return self._call(JobHistory, "GET", f"/v1/jobs/{job}/history")

    def explain(self, job: str) -> str:
        return self._send("GET", f"/v1/jobs/{job}/explain").text

    def login_link(self) -> str:
        """A one-time URL that opens the status page in a browser."""
        return self.url + self._call(LoginLink, "POST", "/v1/login-links").path

    def table_page(
        self, job: str, token: str | None = None, page_size: int | None = None, max_rows: int | None = None
    ) -> TablePage:
        params = {
            key: value
            for key, value in (("token", token), ("page_size", page_size), ("max_rows", max_rows))
            if value is not None
        }
        return self._call(TablePage, "GET", f"/v1/jobs/{job}/result/table", params=params)

    def changelog_page(
        self,
        job: str,
        token: str | None = None,
        max_changes: int | None = None,
        start: str = "beginning",
        after: int | None = None,
    ) -> ChangelogPage:
        params: dict[str, Any] = {"start": start}
        if token is not None:
            params["token"] = token
        if max_changes is not None:
            params["max_changes"] = max_changes
        if after is not None:
            params["after"] = after
        return self._call(ChangelogPage, "GET", f"/v1/jobs/{job}/result/changelog", params=params)
