"""What the gateway refuses, in its own words: the domain errors of the service.

The service (:mod:`.service` and the modules it is made of) raises these and knows nothing of
HTTP; the routes map each class to one status in ONE place (:data:`upsertmat.gateway.routes.errors.STATUS`).
Every error carries the message the user sees: what is wrong and, where there is one, what to do.
"""

from __future__ import annotations


class Refusal(Exception):
    """A request the gateway refuses; ``message`` names what is wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Invalid(Refusal):
    """A request that cannot be read or used as written: a malformed document or token, an
    unknown configuration key, a value out of its range."""


class Forbidden(Refusal):
    """A job that would read or write outside the data root, or one of the gateway's own files."""


class NotFound(Refusal):
    """No such session, job, source directory, snapshot or changelog reader."""


class Conflict(Refusal):
    """What the job's state, another job, or the sink does not allow now."""


class Gone(Refusal):
    """A token that was valid once and is no longer: an expired snapshot, a stale changelog token."""


class OverBound(Refusal):
    """One more session or running job than the gateway's bounds allow."""
