"""The issue's performance goals, checked from the medians measured in one run.

1. ``flat``: MAP and SORTED stay flat: throughput at retract_delay=5000 is at least 0.7x
   the throughput at retract_delay=10 (every backend, upsert key and percentage run).
2. ``absolute``: MAP on rocksdb >= 30 ops/ms and on lmdb >= 50 ops/ms at retract_delay 1000
   and 5000.
3. ``vs-legacy``: MAP is >= 50x faster than LEGACY on rocksdb at retract_delay=1000,
   retract_percentage=75.
4. ``adaptive``: ADAPTIVE costs at most 10% against VALUE on short histories
   (retract_delay=2), i.e. ADAPTIVE / VALUE >= 0.9. Checked at retract_percentage=100 only:
   at 75% the history grows to ~1,400 rows whatever the delay, so it is not short.

5. ``every-cell``: no pathological cell. Every (strategy, backend) pair run, at
   retract_delay 2 and 1000 (retract_percentage 100, each upsert-key setting run), reaches a
   floor: 50 ops/ms at history 2; at history 1000, 30 ops/ms for the strategies whose cost
   does not grow with the history (MAP, SORTED, ADAPTIVE) and 1 op/ms for LEGACY and VALUE,
   whose O(n) bytes per event are their design. (SORTED on rocksdb once ran at 0.64 ops/ms at
   history 2 with the commit interval at 1000; the other goals only looked at long histories.)

A value comes from a cell's median; a ``partial`` cell (budget ran out) gives only its rate
over the records done, which is treated as an *upper bound* of the true throughput (history
only grows during a run, so later records are never cheaper). Bounds propagate through ratios;
a check is ``PASS`` or ``MISS`` when the bound decides it and ``INCONCLUSIVE`` otherwise.
A goal none of whose cells were run appears once as ``NOT RUN``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..impls import Backend, Strategy
from .runner import OK, PARTIAL, CellResult

PASS = "PASS"
MISS = "MISS"
INCONCLUSIVE = "INCONCLUSIVE"
NOT_RUN = "NOT RUN"

EXACT = "exact"
UPPER = "upper"  # the true value is at most this
LOWER = "lower"  # the true value is at least this


@dataclass(frozen=True)
class Measure:
    """A measured value and whether it is exact or a bound."""

    value: float
    bound: str = EXACT

    def __truediv__(self, other: Measure) -> Measure:
        """Ratio with bounds propagated (upper/exact = upper, exact/upper = lower...)."""
        flipped = {EXACT: EXACT, UPPER: LOWER, LOWER: UPPER}[other.bound]
        if self.bound == EXACT:
            bound = flipped
        elif flipped in (EXACT, self.bound):
            bound = self.bound
        else:
            bound = "unknown"
        return Measure(self.value / other.value if other.value else float("inf"), bound)


@dataclass(frozen=True)
class GoalCheck:
    """One instance of a goal: ``measured >= target`` for ``subject``."""

    goal: str
    subject: str
    measured: float | None
    target: float
    status: str
    bound: str = EXACT
    detail: str = ""

    @property
    def margin(self) -> float | None:
        """``measured / target - 1`` (0.25 = 25% above the target), None when not measured."""
        if self.measured is None:
            return None
        return self.measured / self.target - 1


GOALS: dict[str, str] = {
    "flat": "MAP and SORTED flat: ops/ms at retract_delay=5000 >= 0.7x ops/ms at retract_delay=10",
    "absolute": "MAP >= 30 ops/ms on rocksdb and >= 50 ops/ms on lmdb at retract_delay 1000 and 5000",
    "vs-legacy": "MAP >= 50x LEGACY on rocksdb at retract_delay=1000, retract_percentage=75",
    "adaptive": "ADAPTIVE >= 0.9x VALUE (at most 10% slower) at retract_delay=2, retract_percentage=100",
    "every-cell": "every (strategy, backend) >= 50 ops/ms at retract_delay=2 and, at retract_delay=1000, "
    ">= 30 ops/ms (MAP, SORTED, ADAPTIVE) or >= 1 op/ms (LEGACY, VALUE); retract_percentage=100",
}

CELL_FLOORS: dict[int, dict[Strategy, float]] = {
    2: dict.fromkeys(Strategy, 50.0),
    1000: {
        Strategy.MAP: 30.0,
        Strategy.SORTED: 30.0,
        Strategy.ADAPTIVE: 30.0,
        Strategy.LEGACY: 1.0,
        Strategy.VALUE: 1.0,
    },
}
"""The ``every-cell`` goal's floor (ops/ms) per retract_delay and strategy."""


def decide(measure: Measure, target: float) -> str:
    """PASS / MISS / INCONCLUSIVE of ``measure >= target`` given the measure's bound."""
    meets = measure.value >= target
    if measure.bound == EXACT:
        return PASS if meets else MISS
    if meets and measure.bound == LOWER:
        return PASS
    if not meets and measure.bound == UPPER:
        return MISS
    return INCONCLUSIVE


class _Index:
    """Lookup of measured cells by their axes."""

    def __init__(self, results: Iterable[CellResult]) -> None:
        self.results = {
            (
                r.cell.strategy,
                r.cell.backend,
                r.cell.upsert_key,
                r.cell.retract_delay,
                r.cell.retract_percentage,
            ): r
            for r in results
        }

    def measure(
        self, strategy: Strategy, backend: Backend, upsert_key: bool, delay: int, percentage: int
    ) -> Measure | None:
        result = self.results.get((strategy, backend, upsert_key, delay, percentage))
        if result is None or result.estimate is None or result.status not in (OK, PARTIAL):
            return None
        return Measure(result.estimate, EXACT if result.status == OK else UPPER)

    def combos(self, strategy: Strategy, backend: Backend) -> list[tuple[bool, int]]:
        """(upsert key, percentage) pairs run for the implementation, in a stable order."""
        seen = {(key[2], key[4]) for key in self.results if key[0] == strategy and key[1] == backend}
        return sorted(seen, key=lambda pair: (not pair[0], -pair[1]))

    def backends(self) -> list[Backend]:
        return sorted({key[1] for key in self.results}, key=list(Backend).index)


def _subject(implementation: str, upsert_key: bool, percentage: int, extra: str = "") -> str:
    ukey = "on" if upsert_key else "off"
    return f"{implementation} ukey={ukey} pct={percentage}{extra}"


def _check(goal: str, subject: str, measure: Measure | None, target: float, detail: str) -> GoalCheck | None:
    if measure is None:
        return None
    return GoalCheck(goal, subject, measure.value, target, decide(measure, target), measure.bound, detail)


def check_goals(results: Iterable[CellResult]) -> list[GoalCheck]:
    """Every goal instance the measured cells allow, plus a NOT RUN line per absent goal."""
    index = _Index(results)
    checks: list[GoalCheck | None] = []
    for backend in index.backends():
        for strategy in (Strategy.MAP, Strategy.SORTED):
            for upsert_key, pct in index.combos(strategy, backend):
                far = index.measure(strategy, backend, upsert_key, 5000, pct)
                near = index.measure(strategy, backend, upsert_key, 10, pct)
                if far is not None and near is not None:
                    name = f"{strategy.value}/{backend.value}"
                    detail = f"{far.value:.3g} / {near.value:.3g} ops/ms (delay 5000 / delay 10)"
                    checks.append(_check("flat", _subject(name, upsert_key, pct), far / near, 0.7, detail))
    for backend, target in ((Backend.ROCKSDB, 30.0), (Backend.LMDB, 50.0)):
        for upsert_key, pct in index.combos(Strategy.MAP, backend):
            for delay in (1000, 5000):
                measure = index.measure(Strategy.MAP, backend, upsert_key, delay, pct)
                subject = _subject(f"MAP/{backend.value}", upsert_key, pct, f" delay={delay}")
                checks.append(_check("absolute", subject, measure, target, "median ops/ms"))
    for upsert_key in dict.fromkeys(key for key, _ in index.combos(Strategy.MAP, Backend.ROCKSDB)):
        fast = index.measure(Strategy.MAP, Backend.ROCKSDB, upsert_key, 1000, 75)
        slow = index.measure(Strategy.LEGACY, Backend.ROCKSDB, upsert_key, 1000, 75)
        if fast is not None and slow is not None:
            detail = f"{fast.value:.3g} / {slow.value:.3g} ops/ms (MAP / LEGACY)"
            subject = _subject("MAP vs LEGACY /rocksdb", upsert_key, 75, " delay=1000")
            checks.append(_check("vs-legacy", subject, fast / slow, 50.0, detail))
    for backend in index.backends():
        for upsert_key in dict.fromkeys(key for key, _ in index.combos(Strategy.ADAPTIVE, backend)):
            adaptive = index.measure(Strategy.ADAPTIVE, backend, upsert_key, 2, 100)
            value = index.measure(Strategy.VALUE, backend, upsert_key, 2, 100)
            if adaptive is not None and value is not None:
                detail = f"{adaptive.value:.3g} / {value.value:.3g} ops/ms (ADAPTIVE / VALUE)"
                subject = _subject(f"ADAPTIVE vs VALUE /{backend.value}", upsert_key, 100, " delay=2")
                checks.append(_check("adaptive", subject, adaptive / value, 0.9, detail))
    checks += _every_cell(index)
    found = [check for check in checks if check is not None]
    for goal, text in GOALS.items():
        if not any(check.goal == goal for check in found):
            found.append(
                GoalCheck(goal, "-", None, _TARGETS[goal], NOT_RUN, detail=f"needed cells not run: {text}")
            )
    order = list(GOALS)
    return sorted(found, key=lambda check: order.index(check.goal))


def _every_cell(index: _Index) -> list[GoalCheck | None]:
    """The ``every-cell`` checks of every measured (strategy, backend, upsert key)."""
    checks: list[GoalCheck | None] = []
    for backend in index.backends():
        for strategy in Strategy:
            for upsert_key, pct in index.combos(strategy, backend):
                if pct != 100:
                    continue
                for delay, floors in CELL_FLOORS.items():
                    if strategy not in floors:
                        continue
                    measure = index.measure(strategy, backend, upsert_key, delay, pct)
                    subject = _subject(
                        f"{strategy.value}/{backend.value}", upsert_key, pct, f" delay={delay}"
                    )
                    checks.append(_check("every-cell", subject, measure, floors[strategy], "median ops/ms"))
    return checks


_TARGETS = {"flat": 0.7, "absolute": 30.0, "vs-legacy": 50.0, "adaptive": 0.9, "every-cell": 50.0}
