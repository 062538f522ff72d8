"""Pinned streams: inputs that once exposed a bug, or encode a known trap (docs/spec.md section 5 and rule 4).

Every stream here is replayed by the conformance suite on every implementation, before the
random search (the model gives the expected outputs, input by input). When Hypothesis finds a
failure, pin its ``arrival`` here (or as a hand-checked scenario in ``scenarios.py``).
"""

from __future__ import annotations

from ..spec import Change, TtlSettings, delete, insert, update_after, update_before
from .generators import KEYS_WITH_UPSERT_KEY, KEYS_WITHOUT_UPSERT_KEY, Advance, GeneratedStream, TimedStream


def _stream(upsert_key: bool, *arrival: Change) -> GeneratedStream:
    keys = KEYS_WITH_UPSERT_KEY if upsert_key else KEYS_WITHOUT_UPSERT_KEY
    return GeneratedStream(keys, arrival, arrival)


UPSERT_KEY_CHAIN = _stream(
    True,
    insert(1, "u1", 10, "a"),
    insert(1, "u2", 10, "b"),
    insert(2, "u1", 10, "other key"),
    update_after(1, "u1", 20, "a2"),  # replace a non-last element in place
    insert(1, "u3", 10, "c"),
    delete(1, "u1", 20, "a2"),  # retract the first occurrence
    insert(1, "u1", 30, "a3"),  # append the same upsert key again, now last
    update_after(1, "u1", 40, "a4"),  # replace the last element
    delete(2, "u1", 10, "other key"),
    update_before(1, "u3", 10, "c"),
    update_after(1, "u2", 50, "b2"),  # replace the first element
    delete(1, "u1", 0, None),  # the last element; -D carries other non-key values
    delete(1, "u2", 0, None),
)
"""docs/spec.md section 5 and rule 4: append, replace in place and retract one upsert key between other keys
(the sequence that corrupted a linked implementation's per-row chain)."""

DUPLICATE_CHAIN = _stream(
    False,
    insert(1, "x", 10, "a"),
    insert(1, "x", 10, "a"),
    insert(1, "y", 20, "b"),
    insert(1, "x", 10, "a"),
    delete(1, "x", 10, "a"),  # first copy
    insert(1, "x", 10, "a"),
    delete(1, "x", 10, "a"),
    delete(1, "y", 20, "b"),
    delete(1, "x", 10, "a"),
    delete(1, "x", 10, "a"),  # the last copy: empties the key
    delete(1, "x", 10, "a"),  # a miss
)
"""A multiset chain: four copies of one row, removed first-to-last around another row."""

SEQUENCE_COLLISION = _stream(
    True,
    insert(1, "u30", 10, "a"),
    insert(1, "u20", 10, "b"),
    insert(1, "u30", 10, "a"),  # replaces the first (non-tail) element in place
    delete(1, "u30", 10, "a"),  # removes it: not the last, nothing emitted
    insert(1, "u10", 10, "c"),  # a new element after the replaced and removed one
)
"""Apache Flink 2.3.0's MAP strategy fails on this (FLINK-39740: replacing a non-tail element
lowered its sequence counter, so the next element's node collided with an existing one);
found by the suite's bare-update streams and shortened by hand."""

SEQUENCE_WRONG_ROLLBACK = _stream(
    True,
    insert(1, "u20", 10, "b"),
    insert(1, "u30", 10, "a"),
    insert(1, "u20", 10, "b"),  # replaces the first (non-tail) element in place
    insert(1, "u10", 10, "a"),
    delete(1, "u10", 10, "a"),  # rule 9: +U of the new last, [1, "u30", 10, "a"]
)
"""FLINK-39740 without a crash: Apache Flink 2.3.0's MAP strategy rolls back to the replaced
element instead of the new last one (``+U [1, "u20", 10, "b"]``); on both state backends."""

ADAPTIVE_AFTER_SWITCH = _stream(
    True,
    insert(1, "u20", 10, "b"),
    insert(1, "u10", 10, "c"),
    insert(1, "u30", 10, "a"),
    delete(1, "u20", 10, "b"),
    insert(1, "u10", 10, "c"),  # replaces in place
    insert(1, "u20", 10, "b"),
    delete(1, "u30", 10, "a"),  # rule 10: not the last element, nothing to emit
)
"""Apache Flink 2.3.0's ADAPTIVE strategy with thresholds 3/1 (so the key switches to MAP)
emits a ``+U [1, "u10", 10, "c"]`` here: the same FLINK-39740 once the state is in MAP form."""

PINNED: tuple[GeneratedStream, ...] = (
    SEQUENCE_WRONG_ROLLBACK,
    ADAPTIVE_AFTER_SWITCH,
    UPSERT_KEY_CHAIN,
    DUPLICATE_CHAIN,
    SEQUENCE_COLLISION,
)
"""In this order: an implementation that fails several reports the first, so the ones whose
failure is a wrong output (a rule to blame) come before the one that crashes Flink's MAP."""


def ttl_probe(ttl: TtlSettings) -> TimedStream:
    """A timed stream that tells TTL ``ttl`` from no TTL in every configuration (both time
    domains, every update policy, per element and per key): a row, the clock (the watermark in
    event time) moved past its expiry, the row retracted. With TTL the row is gone: a miss
    (rule 7), nothing emitted; without TTL: ``-D`` (rule 8). The suite feeds it before the TTL
    streams and machines, so an implementation that ignores TTL fails at once, on three inputs,
    not after Hypothesis has shrunk a generated stream."""
    later = 2 * max(ttl.ttl_ms, 1)
    return TimedStream(
        KEYS_WITHOUT_UPSERT_KEY,
        (insert(1, "u1", 10, "a", ts=0), Advance(later), delete(1, "u1", 10, "a", ts=later)),
    )
