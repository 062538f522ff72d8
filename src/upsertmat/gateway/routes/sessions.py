"""Sessions: open one with its configuration layer, read it, set more properties, close it."""

from __future__ import annotations

from fastapi import APIRouter

from ..contract import ConfigureRequest, Session, SessionClosed, SessionRequest
from ..encoding import utc_time
from ..registry import SessionRecord
from ..service import Gateway
from .common import SessionId
from .errors import errors


def session_model(record: SessionRecord) -> Session:
    """A session as the API shows it."""
    return Session(session=record.id, properties=record.properties, created=utc_time(record.created))


def router(gateway: Gateway) -> APIRouter:
    """The session routes of ``gateway``."""
    routes = APIRouter()

    @routes.post(
        "/v1/sessions",
        status_code=201,
        summary="open a session with its configuration layer",
        responses=errors(400, 413, 429),
    )
    def open_session(body: SessionRequest) -> Session:
        record = gateway.open_session(body.properties.layer())
        return session_model(gateway.session(record.id))

    @routes.get("/v1/sessions/{session}", summary="a session's properties", responses=errors(400, 404))
    def get_session(session: SessionId) -> Session:
        return session_model(gateway.session(session))

    @routes.post(
        "/v1/sessions/{session}/configure",
        summary="set properties of a session",
        responses=errors(400, 404, 413),
    )
    def configure(session: SessionId, body: ConfigureRequest) -> Session:
        return session_model(gateway.configure_session(session, body.properties.layer()))

    @routes.delete(
        "/v1/sessions/{session}",
        summary="close a session (its jobs keep running)",
        responses=errors(400, 404),
    )
    def close_session(session: SessionId) -> SessionClosed:
        gateway.close_session(session)
        return SessionClosed(session=session, closed=True)

    return routes
