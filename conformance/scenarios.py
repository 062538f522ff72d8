"""The scenario catalogue: hand-written inputs with hand-written expected outputs.

The expected outputs below were worked out from the rules of docs/spec.md section 3 by hand; they
are NOT computed by the model (``tests/spec/test_scenarios.py`` checks the model against them, the
conformance suite checks every implementation). Rows are ``(pk, uk, level, payload)`` unless a
scenario says otherwise; sink PK column 0; upsert key column 1 when a scenario uses one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from ..spec import (
    Change,
    Granularity,
    Keys,
    Row,
    TimeDomain,
    TtlSettings,
    UpdateType,
    delete,
    insert,
    update_after,
    update_before,
)
from .generators import Advance, Step

NO_UK = Keys(pk=(0,))
UK = Keys(pk=(0,), upsert_key=(1,))


@dataclass(frozen=True)
class Scenario:
    """Inputs and, for each input, the one expected output (or None).

    ``misses``: the expected ``retract_misses`` after the last input (rule 7).
    """

    name: str
    keys: Keys
    inputs: tuple[Change, ...]
    expected: tuple[Change | None, ...]
    misses: int = 0
    note: str = ""

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.expected):
            raise ValueError(f"scenario {self.name}: {len(self.inputs)} inputs, {len(self.expected)} outputs")


def _s(
    name: str,
    keys: Keys,
    steps: list[tuple[Change, Change | None]],
    misses: int = 0,
    note: str = "",
) -> Scenario:
    return Scenario(
        name, keys, tuple(i for i, _ in steps), tuple(o for _, o in steps), misses=misses, note=note
    )


# --- docs/spec.md, the worked example: rows (id, level, payload), sink PK id, no upsert key ---
_A1: Row = (1, 10, "a1")
_B1: Row = (1, 20, "b1")

WORKED_EXAMPLE = [
    _s(
        "worked-example/in-order",
        NO_UK,
        [
            (insert(*_A1), insert(*_A1)),
            (update_before(*_A1), delete(*_A1)),
            (update_after(*_B1), insert(*_B1)),
        ],
    ),
    _s(
        "worked-example/update-before-overtaken",
        NO_UK,
        [(insert(*_A1), insert(*_A1)), (update_after(*_B1), update_after(*_B1)), (update_before(*_A1), None)],
    ),
    _s(
        "worked-example/update-after-first",
        NO_UK,
        [
            (update_after(*_B1), insert(*_B1)),
            (insert(*_A1), update_after(*_A1)),
            (update_before(*_A1), update_after(*_B1)),
        ],
    ),
]

# --- three rows of one sink key, retracted in each of the six orders ---
_ROWS: dict[str, Row] = {"a": (1, "x", 10, "a"), "b": (1, "y", 20, "b"), "c": (1, "z", 30, "c")}
# With an upsert key the retractions carry other non-key values than the stored rows: they
# match by upsert key, the emptying -D carries the INCOMING row, a rollback +U the STORED row.
_RETRACTIONS_UK = {"a": (1, "x", 11, "a-gone"), "b": (1, "y", 21, "b-gone"), "c": (1, "z", 31, "c-gone")}

# order -> per retraction: ("none") / ("rollback", name of stored row) / ("delete")
_SIX_ORDERS: dict[str, tuple[str, str, str]] = {
    "abc": ("none", "none", "delete"),
    "acb": ("none", "rollback:b", "delete"),
    "bac": ("none", "none", "delete"),
    "bca": ("none", "rollback:a", "delete"),
    "cab": ("rollback:b", "none", "delete"),
    "cba": ("rollback:b", "rollback:a", "delete"),
}


def _six_orders(keys: Keys, retraction_rows: Mapping[str, Row], tag: str) -> list[Scenario]:
    scenarios = []
    for order, outcomes in _SIX_ORDERS.items():
        steps: list[tuple[Change, Change | None]] = [
            (insert(*_ROWS["a"]), insert(*_ROWS["a"])),
            (insert(*_ROWS["b"]), update_after(*_ROWS["b"])),
            (insert(*_ROWS["c"]), update_after(*_ROWS["c"])),
        ]
        for position, (name, outcome) in enumerate(zip(order, outcomes, strict=True)):
            row = retraction_rows[name]
            incoming = update_before(*row) if position % 2 else delete(*row)
            if outcome == "none":
                expected: Change | None = None
            elif outcome == "delete":
                expected = delete(*row)
            else:
                expected = update_after(*_ROWS[outcome.split(":")[1]])
            steps.append((incoming, expected))
        scenarios.append(_s(f"three-rows/{tag}/retract-{order}", keys, steps))
    return scenarios


SIX_ORDERS = _six_orders(NO_UK, _ROWS, "no-upsert-key") + _six_orders(UK, _RETRACTIONS_UK, "upsert-key")

_A: Row = (1, "x", 10, "a")
_B: Row = (1, "y", 20, "b")
_A2: Row = (1, "x", 11, "a2")

EDGE_CASES = [
    _s(
        "duplicates/no-upsert-key",
        NO_UK,
        [
            (insert(*_A), insert(*_A)),
            (insert(*_A), update_after(*_A)),
            (delete(*_A), None),
            (delete(*_A), delete(*_A)),
        ],
        note="the same row live twice: a multiset; the first retraction removes a non-last copy",
    ),
    _s(
        "duplicates/first-copy-removed",
        NO_UK,
        [
            (insert(*_A), insert(*_A)),
            (insert(*_B), update_after(*_B)),
            (insert(*_A), update_after(*_A)),
            (delete(*_A), None),
            (delete(*_A), update_after(*_B)),
            (update_before(*_B), delete(*_B)),
        ],
        note="[a, b, a]: rule 6 removes the FIRST a (non-last: nothing), then the last a (+U b)",
    ),
    _s(
        "duplicates/upsert-key-replaces",
        UK,
        [
            (insert(*_A), insert(*_A)),
            (insert(*_A), update_after(*_A)),
            (delete(*_A), delete(*_A)),
            (delete(*_A), None),
        ],
        misses=1,
        note="with an upsert key the second +I replaces the first: one row, the 2nd -D misses",
    ),
    _s(
        "retraction-before-insert",
        NO_UK,
        [(delete(*_A), None), (insert(*_A), insert(*_A)), (delete(*_A), delete(*_A))],
        misses=1,
    ),
    _s(
        "retraction-of-never-added-row",
        NO_UK,
        [
            (insert(*_A), insert(*_A)),
            (update_before(*_B), None),
            (delete(*_A2), None),
            (delete(*_A), delete(*_A)),
        ],
        misses=2,
        note="without an upsert key a2 (same uk, other values) does not match a",
    ),
    _s(
        "upsert-key/replace-non-last",
        UK,
        [
            (insert(*_A), insert(*_A)),
            (insert(*_B), update_after(*_B)),
            (update_after(*_A2), update_after(*_A2)),
            (delete(*_B), update_after(*_A2)),
            (delete(1, "x", 99, "zz"), delete(1, "x", 99, "zz")),
        ],
        note="rule 4 keeps a2 at a's position and emits +U a2 although b is last; the -D that "
        "empties the key carries the incoming row's non-key values (99, 'zz')",
    ),
    _s(
        "upsert-key/replace-last-then-rollback",
        UK,
        [
            (insert(*_B), insert(*_B)),
            (insert(*_A), update_after(*_A)),
            (update_after(*_A2), update_after(*_A2)),
            (update_before(*_A), update_after(*_B)),
            (delete(*_B), delete(*_B)),
        ],
        note="-U a matches a2 by upsert key; the rollback +U carries the stored b",
    ),
    _s(
        "first-row-as-update-after",
        NO_UK,
        [
            (update_after(*_A), insert(*_A)),
            (update_after(*_B), update_after(*_B)),
            (delete(*_B), update_after(*_A)),
        ],
    ),
    _s(
        "first-row-as-update-after/upsert-key",
        UK,
        [
            (update_after(*_A), insert(*_A)),
            (update_after(*_A2), update_after(*_A2)),
            (delete(*_A), delete(*_A)),
        ],
    ),
    _s(
        "type-exact/rows",
        NO_UK,
        [
            (insert(1, "x", 1, "p"), insert(1, "x", 1, "p")),
            (insert(1, "x", 1.0, "p"), update_after(1, "x", 1.0, "p")),
            (insert(1, "x", True, "p"), update_after(1, "x", True, "p")),
            (delete(1, "x", 1.0, "p"), None),
            (delete(1, "x", True, "p"), update_after(1, "x", 1, "p")),
            (delete(1, "x", 1.0, "p"), None),
            (delete(1, "x", 1, "p"), delete(1, "x", 1, "p")),
        ],
        misses=1,
        note="1, 1.0 and True are three different values: the 2nd -D of 1.0 misses",
    ),
    _s(
        "type-exact/sink-keys",
        NO_UK,
        [
            (insert(1, "x", 0, "p"), insert(1, "x", 0, "p")),
            (insert(1.0, "x", 0, "p"), insert(1.0, "x", 0, "p")),
            (insert(True, "x", 0, "p"), insert(True, "x", 0, "p")),
            (insert("1", "x", 0, "p"), insert("1", "x", 0, "p")),
            (delete(1.0, "x", 0, "p"), delete(1.0, "x", 0, "p")),
            (delete(1, "x", 0, "p"), delete(1, "x", 0, "p")),
        ],
        note="sink keys 1, 1.0, True and '1' are four context keys",
    ),
    _s(
        "type-exact/upsert-keys",
        UK,
        [
            (insert(1, 1, 0, "p"), insert(1, 1, 0, "p")),
            (insert(1, 1.0, 0, "q"), update_after(1, 1.0, 0, "q")),
            (insert(1, 1, 0, "r"), update_after(1, 1, 0, "r")),
            (delete(1, 1.0, 5, None), update_after(1, 1, 0, "r")),
            (delete(1, True, 5, None), None),
            (delete(1, 1, 5, None), delete(1, 1, 5, None)),
        ],
        misses=1,
        note="upsert keys 1 and 1.0 differ: +I uk 1 replaces row p in place (position 0)",
    ),
    _s(
        "interleaved-sink-keys",
        NO_UK,
        [
            (insert(1, "x", 10, "a"), insert(1, "x", 10, "a")),
            (insert(2, "x", 10, "a"), insert(2, "x", 10, "a")),
            (insert(1, "y", 20, "b"), update_after(1, "y", 20, "b")),
            (delete(2, "x", 10, "a"), delete(2, "x", 10, "a")),
            (delete(1, "y", 20, "b"), update_after(1, "x", 10, "a")),
            (insert(2, "z", 30, None), insert(2, "z", 30, None)),
        ],
    ),
    _s(
        "composite-sink-key",
        Keys(pk=(0, 2)),
        [
            (insert(1, "x", 10, "a"), insert(1, "x", 10, "a")),
            (insert(1, "x", 20, "a"), insert(1, "x", 20, "a")),
            (insert(1, "y", 10, "b"), update_after(1, "y", 10, "b")),
            (delete(1, "x", 10, "a"), None),
            (delete(1, "x", 20, "a"), delete(1, "x", 20, "a")),
        ],
        note="sink PK (column 0, column 2): (1, 10) and (1, 20) are different keys",
    ),
]

SCENARIOS: tuple[Scenario, ...] = tuple(itertools.chain(WORKED_EXAMPLE, SIX_ORDERS, EDGE_CASES))
"""Every scenario of the catalogue."""

BY_NAME = {scenario.name: scenario for scenario in SCENARIOS}
if len(BY_NAME) != len(SCENARIOS):  # pragma: no cover - a catalogue editing mistake
    raise RuntimeError("two scenarios share a name")


# -- TTL (docs/ttl.md) ---------------------------------------------------------------


@dataclass(frozen=True)
class TtlScenario:
    """A TTL scenario: steps (changes and clock advances) and the output expected at each.

    Advances expect None. ``granularity`` says which implementations it applies to
    (``PER_KEY``: LEGACY; ``PER_ELEMENT``: the others).
    """

    name: str
    keys: Keys
    ttl: TtlSettings
    granularity: Granularity
    steps: tuple[Step, ...]
    expected: tuple[Change | None, ...]
    misses: int = 0
    note: str = ""


def _t(
    name: str,
    keys: Keys,
    ttl: TtlSettings,
    granularity: Granularity,
    steps: list[Advance | tuple[Change, Change | None]],
    misses: int = 0,
    note: str = "",
) -> TtlScenario:
    items = [(step, None) if isinstance(step, Advance) else step for step in steps]
    return TtlScenario(
        name,
        keys,
        ttl,
        granularity,
        tuple(step for step, _ in items),
        tuple(out for _, out in items),
        misses,
        note,
    )


TTL10 = TtlSettings(ttl_ms=10)
TTL10_ON_CREATE = TtlSettings(ttl_ms=10, update_type=UpdateType.ON_CREATE)
TTL10_ON_READ = TtlSettings(ttl_ms=10, update_type=UpdateType.ON_READ_AND_WRITE)
TTL10_EVENT = TtlSettings(ttl_ms=10, time_domain=TimeDomain.EVENT_TIME)
_E, _K = Granularity.PER_ELEMENT, Granularity.PER_KEY
_a, _b, _c = (1, "u1", 10, "a"), (1, "u2", 10, "b"), (1, "u1", 20, "c")

TTL_SCENARIOS: tuple[TtlScenario, ...] = (
    _t(
        "ttl-expiry-is-exact",
        NO_UK,
        TTL10,
        _E,
        [
            (insert(*_a), insert(*_a)),
            Advance(9),
            (delete(*_a), delete(*_a)),
            (insert(*_a), insert(*_a)),
            Advance(19),
            (delete(*_a), None),
        ],
        misses=1,
        note="stamped 9, ttl 10: visible at 18, gone from the instant 19 (not at a later cleanup)",
    ),
    _t(
        "ttl-expired-retraction-is-a-miss",
        NO_UK,
        TTL10,
        _E,
        [
            (insert(*_a), insert(*_a)),
            Advance(10),
            (update_before(*_a), None),
            (update_after(1, "u1", 20, "b"), insert(1, "u1", 20, "b")),
        ],
        misses=1,
        note="expiry emits nothing: the sink keeps the stale row a until the next write to the key",
    ),
    _t(
        "ttl-older-element-expires-newer-stays",
        NO_UK,
        TTL10,
        _E,
        [
            (insert(*_a), insert(*_a)),
            Advance(5),
            (insert(*_b), update_after(*_b)),
            Advance(10),
            (delete(*_b), delete(*_b)),
        ],
        note="a (stamped 0) expired at 10, so removing b empties the key: -D, not +U(a)",
    ),
    _t(
        "ttl-replacement-refreshes-stamp-older-behind-expires",
        UK,
        TTL10,
        _E,
        [
            (insert(*_a), insert(*_a)),
            Advance(2),
            (update_after(*_b), update_after(*_b)),
            Advance(6),
            (update_after(*_c), update_after(*_c)),
            Advance(12),
            (update_before(*_c), delete(*_c)),
        ],
        note="u1 replaced in place at 6 (re-stamped, visible until 16); u2 behind it, stamped 2, "
        "expired at 12: removing u1 empties the key",
    ),
    _t(
        "ttl-on-create-replacement-keeps-stamp",
        UK,
        TTL10_ON_CREATE,
        _E,
        [
            (insert(*_a), insert(*_a)),
            Advance(2),
            (update_after(*_b), update_after(*_b)),
            Advance(6),
            (update_after(*_c), update_after(*_c)),
            Advance(10),
            (update_before(*_c), None),
            (update_before(*_b), delete(*_b)),
        ],
        misses=1,
        note="on_create: the replacement at 6 keeps u1's stamp 0, so u1 expires at 10; u2 (2) lives to 12",
    ),
    _t(
        "ttl-on-read-and-write-rollback-restamps",
        NO_UK,
        TTL10_ON_READ,
        _E,
        [
            (insert(*_a), insert(*_a)),
            Advance(5),
            (insert(*_b), update_after(*_b)),
            Advance(8),
            (delete(*_b), update_after(*_a)),
            Advance(12),
            (delete(*_a), delete(*_a)),
        ],
        note="the rule-9 rollback at 8 re-stamps a with 8: visible until 18",
    ),
    _t(
        "ttl-default-rollback-does-not-restamp",
        NO_UK,
        TTL10,
        _E,
        [
            (insert(*_a), insert(*_a)),
            Advance(5),
            (insert(*_b), update_after(*_b)),
            Advance(8),
            (delete(*_b), update_after(*_a)),
            Advance(12),
            (delete(*_a), None),
        ],
        misses=1,
        note="on_create_and_write: a keeps its stamp 0 and expires at 10",
    ),
    _t(
        "ttl-event-time-late-record",
        NO_UK,
        TTL10_EVENT,
        _E,
        [
            (insert(*_a, ts=0), insert(*_a)),
            (insert(*_b, ts=8), update_after(*_b)),
            Advance(10),
            (delete(*_b, ts=11), delete(*_b)),
            (insert(*_c, ts=0), insert(*_c)),
            (delete(*_c, ts=12), None),
        ],
        misses=1,
        note="watermark 10: a (ts 0) expired; c (ts 0) is emitted but already invisible on arrival",
    ),
    _t(
        "ttl-per-key-history-lives-as-one",
        NO_UK,
        TTL10,
        _K,
        [
            (insert(*_a), insert(*_a)),
            Advance(5),
            (insert(*_b), update_after(*_b)),
            Advance(12),
            (delete(*_a), None),
            Advance(21),
            (delete(*_b), delete(*_b)),
            (insert(*_c), insert(*_c)),
            Advance(31),
            (delete(*_c), None),
        ],
        misses=1,
        note="per key: a outlives its own 10 ms because writes at 5 and 12 re-stamp the whole key",
    ),
    _t(
        "ttl-per-key-on-create",
        NO_UK,
        TTL10_ON_CREATE,
        _K,
        [
            (insert(*_a), insert(*_a)),
            Advance(5),
            (insert(*_b), update_after(*_b)),
            Advance(10),
            (delete(*_b), None),
            (insert(*_b), insert(*_b)),
        ],
        misses=1,
        note="on_create: the key keeps the stamp of its creation (0); the whole history expires at 10",
    ),
    _t(
        "ttl-per-key-event-time",
        NO_UK,
        TTL10_EVENT,
        _K,
        [
            (insert(*_a, ts=5), insert(*_a)),
            Advance(14),
            (insert(*_b, ts=9), update_after(*_b)),
            (delete(*_a, ts=20), None),
            (delete(*_b, ts=20), delete(*_b)),
            (insert(*_a, ts=3), insert(*_a)),
            (delete(*_a, ts=20), None),
        ],
        misses=1,
        note="every write sets the key's stamp to its ts, also backwards: the late +I (ts 3) "
        "leaves a key that is invisible at watermark 14",
    ),
)
"""Hand-written TTL scenarios, each verified against the model in tests/ttl/test_ttl.py."""
