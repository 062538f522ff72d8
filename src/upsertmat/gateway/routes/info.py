"""``GET /v1/info``: the gateway's version, master and bounds."""

from __future__ import annotations

from fastapi import APIRouter

from ... import __version__
from ..contract import Bounds, Info
from ..settings import GatewaySettings
from .errors import errors


def router(settings: GatewaySettings) -> APIRouter:
    """The info route of a gateway with ``settings``."""
    routes = APIRouter()

    @routes.get("/v1/info", summary="the gateway's version, master and bounds", responses=errors())
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

    return routes
