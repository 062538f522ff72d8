"""Metrics: ``GET /metrics`` (Prometheus' text format; OpenMetrics when the scraper asks for it)
and a job's recent batches (``GET /v1/jobs/{job}/history``: what the status page plots)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ..contract import JobHistory
from ..metrics import GatewayMetrics
from ..service import Gateway
from .common import JobId
from .errors import errors


def router(metrics: GatewayMetrics, gateway: Gateway) -> APIRouter:
    """The metrics routes, serving ``metrics`` and ``gateway``'s job histories."""
    routes = APIRouter()

    @routes.get("/metrics", include_in_schema=False)
    def prometheus(request: Request) -> Response:
        body, content_type = metrics.render(request.headers.get("accept", ""))
        return Response(body, media_type=content_type)

    @routes.get(
        "/v1/jobs/{job}/history",
        summary="a job's last batches in this process: changes/s, batch seconds, files waiting",
        responses=errors(400, 404),
    )
    def history(job: JobId) -> JobHistory:
        return gateway.history(job)

    return routes
