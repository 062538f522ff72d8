"""What a result mode shows, as plain data: a table snapshot and committed changes (no third-party
import; built from the sink by the embedded client and from JSON by the gateway's client)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Snapshot:
    """A table as one committed batch left it: ``batch_id`` (None: none yet), ``columns``,
    ``rows`` (the first ones by primary key), ``total`` rows in the table."""

    batch_id: int | None
    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    total: int


@dataclass(frozen=True)
class ResultChange:
    """One committed table change: its changelog position, batch id, op and row."""

    pos: int
    batch_id: int
    op: str
    row: tuple[Any, ...]
