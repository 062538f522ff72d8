"""Sessions: a client's configuration layer, kept in the registry, bounded and expiring.

A session holds configuration keys (checked when they are set, so a job submitted in it never
fails on them); a job copies its session's layer when it is submitted, so jobs outlive their
session. At most ``max_sessions`` are open; one unused for ``session_idle_seconds`` expires.
O(sessions) per open or expiry, O(1) otherwise.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ..impls.config import ConfigError, flatten
from ..jobs.loader import resolve_settings, settings_layers
from .errors import Invalid, NotFound, OverBound
from .registry import Registry, SessionRecord
from .settings import GatewaySettings


def check_properties(properties: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The flattened layer; Invalid naming an unknown key or a bad value (and ``where``)."""
    layer = flatten(dict(properties))
    try:
        resolve_settings(settings_layers({}, "", [], [(where, layer)]))
    except ConfigError as error:
        raise Invalid(str(error)) from None
    return layer


class Sessions:
    """The sessions of one gateway's registry, under its current ``settings``."""

    def __init__(self, registry: Registry, settings: GatewaySettings) -> None:
        self.registry = registry
        self.settings = settings

    def open(self, properties: Mapping[str, Any]) -> SessionRecord:
        """A new session (OverBound at ``max_sessions``, after expiring idle ones)."""
        self.expire()
        if len(self.registry.sessions()) >= self.settings.max_sessions:
            raise OverBound(f"too many sessions (max-sessions {self.settings.max_sessions}); close one")
        return self.registry.add_session(check_properties(properties, "the session's properties"))

    def get(self, session_id: str) -> SessionRecord:
        """The session (its use recorded: it does not expire now); NotFound if there is none."""
        found = self.registry.session(session_id)
        if found is None:
            raise NotFound(f"no session {session_id!r} (closed, expired or never opened)")
        self.registry.touch_session(session_id)
        return found

    def configure(self, session_id: str, properties: Mapping[str, Any]) -> SessionRecord:
        """Set ``properties`` over the session's (checked together)."""
        current = self.get(session_id)
        layer = check_properties(
            {**current.properties, **flatten(dict(properties))}, "the session's properties"
        )
        self.registry.touch_session(session_id, layer)
        return self.get(session_id)

    def close(self, session_id: str) -> None:
        """Forget the session (NotFound if there is none); its jobs run on."""
        self.get(session_id)
        self.registry.remove_session(session_id)

    def expire(self, now: float | None = None) -> None:
        """Drop the sessions unused for ``session_idle_seconds``."""
        now = time.time() if now is None else now
        for record in self.registry.sessions():
            if record.last_used < now - self.settings.session_idle_seconds:
                self.registry.remove_session(record.id)
