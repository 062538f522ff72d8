"""The scenario catalogue: hand-written inputs with hand-written expected outputs.

The expected outputs below were worked out from the rules of DESIGN section 3 by hand; they
are NOT computed by the model (``tests/test_scenarios.py`` checks the model against them, the
conformance suite checks every implementation). Rows are ``(pk, uk, level, payload)`` unless a
scenario says otherwise; sink PK column 0; upsert key column 1 when a scenario uses one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

from ..spec import Change, Keys, Row, delete, insert, update_after, update_before

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


# --- DESIGN section 3, worked example: rows (id, level, payload), sink PK id, no upsert key ---
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
