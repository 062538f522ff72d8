"""The gateway's HTTP client (httpx): one method per endpoint, errors as :class:`GatewayError`.

A 4xx/5xx answer becomes ``GatewayError(status, message)`` with the gateway's own message; a
connection that fails (refused, reset, timed out) becomes ``GatewayError(0, ...)``. O(1) per call
apart from the body.
"""

from __future__ import annotations

from typing import Any

import httpx


class GatewayError(Exception):
    """A refused request (``status`` 4xx/5xx) or an unreachable gateway (``status`` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class GatewayClient:
    """A client of one gateway (``url`` like ``http://127.0.0.1:8083``), with its token if any."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise GatewayError(0, f"cannot reach the gateway at {self.url}: {error}") from None
        if response.status_code >= 400:
            try:
                message = response.json()["error"]["message"]
            except (ValueError, KeyError, TypeError):
                message = response.text[:200] or response.reason_phrase
            raise GatewayError(response.status_code, str(message))
        if response.headers.get("content-type", "").startswith("application/json"):
            return response.json()
        return response.text

    def info(self) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", "/v1/info")
        return result

    def open_session(self, properties: dict[str, Any] | None = None) -> str:
        return str(self._call("POST", "/v1/sessions", json={"properties": properties or {}})["session"])

    def configure(self, session: str, properties: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._call(
            "POST", f"/v1/sessions/{session}/configure", json={"properties": properties}
        )
        return result

    def close_session(self, session: str) -> None:
        self._call("DELETE", f"/v1/sessions/{session}")

    def submit(
        self,
        session: str,
        *,
        job: str | None = None,
        plan: dict[str, Any] | None = None,
        settings: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"settings": settings or {}}
        if job is not None:
            body["job"] = job
        if plan is not None:
            body["plan"] = plan
        result: dict[str, Any] = self._call("POST", f"/v1/sessions/{session}/jobs", json=body)
        return result

    def jobs(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/v1/jobs")["jobs"])

    def job(self, job: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("GET", f"/v1/jobs/{job}")
        return result

    def stop(self, job: str) -> dict[str, Any]:
        result: dict[str, Any] = self._call("POST", f"/v1/jobs/{job}/stop")
        return result

    def explain(self, job: str) -> str:
        return str(self._call("GET", f"/v1/jobs/{job}/explain"))

    def table_page(
        self, job: str, token: str | None = None, page_size: int | None = None, max_rows: int | None = None
    ) -> dict[str, Any]:
        params = {
            key: value
            for key, value in (("token", token), ("page_size", page_size), ("max_rows", max_rows))
            if value is not None
        }
        result: dict[str, Any] = self._call("GET", f"/v1/jobs/{job}/result/table", params=params)
        return result

    def changelog_page(
        self, job: str, token: str | None = None, max_changes: int | None = None, start: str = "beginning"
    ) -> dict[str, Any]:
        params: dict[str, Any] = {"start": start}
        if token is not None:
            params["token"] = token
        if max_changes is not None:
            params["max_changes"] = max_changes
        result: dict[str, Any] = self._call("GET", f"/v1/jobs/{job}/result/changelog", params=params)
        return result
