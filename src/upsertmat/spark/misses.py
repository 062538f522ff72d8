"""Miss explanations in the Spark pipeline: from the processor to the driver to a side table.

On the executors, :func:`miss_outputs` turns the explanations of a grouping key's batch
(``take_misses``) into extra output rows with op :data:`MISS_OP` (the explanation's JSON; in
batched output, that JSON packed with msgpack), carrying the arrival of the retraction that
missed. On the driver, :func:`split_misses` takes them out of the batch before the sink applies
it; the sink writes them to :data:`MISSES_TABLE` in the batch's own transaction (so they are
recorded exactly once, with the batch), and :func:`summarize` folds them into a
:class:`~upsertmat.impls.misses.MissSummary` for the progress line and the job summary.

TTL: a strategy object lives for one grouping key and one batch, so the keys whose rows TTL
expiry removed are kept in the processor's own Spark state, :data:`EXPIRED_STATE` (msgpack
``{context: removals}`` per grouping key, with Spark's own state TTL: :func:`expiry_note_ttl`,
the note outlives the rows by one retention period, at least an hour). It is written only by a
batch or a cleanup timer that expired rows, and read only on a miss. Only an output row per miss is added;
inputs that match cost nothing here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import msgpack

from ..impls.misses import MissSummary
from ..spec import Change, Materializer
from ..spec.changes import Row
from ..spec.misses import MissExplanation, from_json

MISS_OP = "?M"
"""The op of an output row carrying a miss's explanation (never a change for the sink)."""

MISSES_TABLE = "_upsertmat_misses"
"""The side table of the sink database holding every explained miss of every batch."""

EXPIRED_STATE = "miss_expired"
"""The processor's Spark value state of expiry notes (one msgpack blob per grouping key)."""

MIN_NOTE_TTL_MS = 3_600_000
"""Expiry notes are kept at least this long (Spark state TTL), however short the operator's TTL."""


def expiry_note_ttl(ttl_ms: int) -> int:
    """How long the expiry notes of a key are kept after their last update: as long as the
    expired rows were kept (the operator's TTL), and at least :data:`MIN_NOTE_TTL_MS`."""
    return max(ttl_ms, MIN_NOTE_TTL_MS)


_PACK = msgpack.Packer(use_bin_type=True, autoreset=True).pack
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def take_misses(materializer: Materializer) -> list[MissExplanation]:
    """The materializer's pending explanations ([] if it gives none)."""
    take: Callable[[], list[MissExplanation]] | None = getattr(materializer, "take_misses", None)
    return [] if take is None else take()


def miss_outputs(
    materializer: Materializer, arrivals: Sequence[int], changes: Sequence[Change], batched: bool
) -> list[tuple[int, str, Any]]:
    """Output rows ``(arrival, MISS_OP, JSON text or msgpack of it)`` for the explanations of the
    inputs ``changes`` (``arrivals`` in step) just applied. O(misses + inputs with a miss)."""
    explanations = take_misses(materializer)
    if not explanations:
        return []
    arrival_of = {id(change): at for at, change in zip(arrivals, changes, strict=True)}
    outputs: list[tuple[int, str, Any]] = []
    for explanation in explanations:
        text = _ENCODER.encode(explanation.to_json())
        outputs.append(
            (arrival_of.get(id(explanation.change), -1), MISS_OP, _PACK(text) if batched else text)
        )
    return outputs


def split_misses(
    changes: list[tuple[int, str, Row]],
) -> tuple[list[tuple[int, str, Row]], list[tuple[int, str]]]:
    """(the sink's changes, ``(arrival, explanation JSON)`` of each miss), order kept. O(n)."""
    kept: list[tuple[int, str, Row]] = []
    misses: list[tuple[int, str]] = []
    for change in changes:
        if change[1] == MISS_OP:
            misses.append((change[0], str(change[2][0])))
        else:
            kept.append(change)
    return kept, misses


def summarize(misses: Sequence[tuple[int, str]], summary: MissSummary | None = None) -> MissSummary:
    """Fold the explanations (JSON texts) of a batch into ``summary`` (a new one if None)."""
    summary = summary if summary is not None else MissSummary()
    for _, text in misses:
        summary.add(from_json(json.loads(text)))
    return summary


def short_columns(summary: MissSummary, names: Sequence[str]) -> str:
    """The columns that differed, most often first, for a progress line (``uuid 12, ts 12``)."""
    ranked = sorted(summary.columns.values(), key=lambda stats: (-stats.differed, stats.column))
    return ", ".join(
        f"{names[s.column] if s.column < len(names) else s.column} {s.differed:,}" for s in ranked[:3]
    )


def decode_expired(blob: bytes | None) -> dict[bytes, int]:
    """An :data:`EXPIRED_STATE` value (None: nothing noted)."""
    if not blob:
        return {}
    notes: dict[bytes, int] = msgpack.unpackb(blob, raw=True, strict_map_key=False)
    return notes


def encode_expired(notes: dict[bytes, int]) -> bytes:
    """An :data:`EXPIRED_STATE` value."""
    return bytes(_PACK(notes))
