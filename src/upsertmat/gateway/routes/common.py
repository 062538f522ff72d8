"""What every router shares: the JSON response class and the path parameters' types."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Path
from fastapi.responses import JSONResponse

from ..contract import JOB_ID, SESSION_ID
from ..encoding import render_json

SessionId = Annotated[str, Path(pattern=SESSION_ID, description="a session id (s-...)")]
JobId = Annotated[str, Path(pattern=JOB_ID, description="a job id (j-...)")]


class PortableJSON(JSONResponse):
    """Strict JSON (``allow_nan=False``); a body holding NaN or an infinity is sent with them as
    strings instead of failing (:func:`upsertmat.gateway.encoding.portable`)."""

    def render(self, content: Any) -> bytes:
        return render_json(content)
