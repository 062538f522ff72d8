"""The gateway's JSON and times: strict JSON (no NaN; non-finite floats as strings) and RFC 3339
UTC datetimes. Used for every body the gateway sends, and for the changelog pages it stores."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any


def render_json(content: Any) -> bytes:
    """Strict JSON (no NaN): a non-finite float is sent as ``"NaN"``, ``"Infinity"``,
    ``"-Infinity"`` (:func:`portable`). O(size)."""
    try:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    except ValueError:
        return json.dumps(portable(content), ensure_ascii=False, separators=(",", ":")).encode()


def portable(value: Any) -> Any:
    """``value`` with non-finite floats as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
    (JSON has no such numbers; a sink's DOUBLE column can hold them). O(size)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: portable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [portable(item) for item in value]
    return value


def utc_time(epoch: float | None) -> Any:
    """An epoch time as an aware UTC datetime (None stays None)."""
    return None if epoch is None else datetime.fromtimestamp(epoch, tz=UTC)
