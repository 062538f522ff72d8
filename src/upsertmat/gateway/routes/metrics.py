"""``GET /metrics``: Prometheus' text format (OpenMetrics when the scraper asks for it)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from ..metrics import GatewayMetrics


def router(metrics: GatewayMetrics) -> APIRouter:
    """The metrics route, serving ``metrics``."""
    routes = APIRouter()

    @routes.get("/metrics", include_in_schema=False)
    def prometheus(request: Request) -> Response:
        body, content_type = metrics.render(request.headers.get("accept", ""))
        return Response(body, media_type=content_type)

    return routes
