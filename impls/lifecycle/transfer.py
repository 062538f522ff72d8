"""Moving state out of and into any implementation, with stamps and the clock.

Implementations offer :class:`~upsertmat.spec.StateTransfer` (elements with TTL stamps and
the clock); older ones may only offer :class:`~upsertmat.spec.HistoryAccess` (rows without
stamps). These helpers take whichever is there, preferring ``StateTransfer``, so checkpoints,
savepoints, migration and rescaling work with both.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from ...spec import Element, HistoryAccess, Materializer, StateTransfer

__all__ = ["NotTransferable", "clock_of", "export_state", "import_state", "supports_transfer"]


class NotTransferable(TypeError):
    """The implementation can neither export nor import its state."""


def supports_transfer(materializer: Materializer) -> bool:
    """True when ``materializer`` offers StateTransfer or HistoryAccess."""
    return isinstance(materializer, StateTransfer | HistoryAccess)


def _refuse(materializer: Materializer) -> NotTransferable:
    return NotTransferable(
        f"{type(materializer).__name__} offers neither StateTransfer (export_elements/import_elements) "
        "nor HistoryAccess (histories/load_histories), so its state cannot be saved or restored"
    )


def clock_of(materializer: Materializer) -> int:
    """The materializer's clock (``now``), or 0 when it does not expose one."""
    if isinstance(materializer, StateTransfer):
        return int(materializer.now)
    now = getattr(materializer, "now", None)
    return now if isinstance(now, int) and not isinstance(now, bool) else 0


def export_state(materializer: Materializer) -> Iterator[tuple[bytes, list[Element]]]:
    """Every non-empty context key with its elements ``(row, stamp)`` in insertion order.

    Without StateTransfer every stamp is the exporter's clock (stamps are not kept there).
    NotTransferable when neither protocol is offered. O(state size).
    """
    if isinstance(materializer, StateTransfer):
        for context, elements in materializer.export_elements():
            yield context, [(tuple(row), int(stamp)) for row, stamp in elements]
        return
    if isinstance(materializer, HistoryAccess):
        now = clock_of(materializer)
        for context, rows in materializer.histories():
            yield context, [(tuple(row), now) for row in rows]
        return
    raise _refuse(materializer)


def import_state(materializer: Materializer, items: Iterable[tuple[bytes, list[Element]]], now: int) -> None:
    """Set the given keys' elements and the clock (``now``) of ``materializer``.

    Without StateTransfer the stamps are dropped (HistoryAccess keeps rows only) and the
    clock is set with ``advance_time``. NotTransferable when neither protocol is offered.
    """
    if isinstance(materializer, StateTransfer):
        materializer.import_elements(items, now)
        return
    if isinstance(materializer, HistoryAccess):
        materializer.load_histories((context, [row for row, _ in elements]) for context, elements in items)
        materializer.advance_time(now)
        return
    raise _refuse(materializer)
