"""What a result mode shows, as plain data, and what shows it: a table snapshot and committed
changes (no third-party import; built from the sink by the embedded client's
:class:`~upsertmat.jobs.embedded.ResultFollower` and from JSON by the gateway's client), the
:class:`Renderer` that draws them and the :class:`Views` that make renderers.

The renderers themselves are :mod:`upsertmat.client.render` (rich, terminals): the command line
hands a run its :class:`Views` (``RunOptions.views``), so ``jobs/`` imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol


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


class Renderer(Protocol):
    """What a result mode does with committed results."""

    def show_table(self, snapshot: Snapshot, rate: float) -> None: ...

    def add_changes(self, changes: Sequence[ResultChange], rate: float) -> None: ...

    def close(self) -> None: ...


class Views(Protocol):
    """Makes the renderer of a result mode, and the key handling that goes with it."""

    def renderer(self, mode: str, title: str, *, max_rows: int, keep: int, format: str) -> Renderer:
        """The renderer of ``mode`` (``table``, ``changelog``, ``tableau``)."""
        ...

    def keys(self, renderer: Renderer) -> AbstractContextManager[object]:
        """What the keyboard does while ``renderer`` shows (paging a table), for the run's length."""
        ...
