"""The ON CONFLICT scenario catalogue: hand-written inputs and hand-written expected outputs.

The expectations were worked out by hand from rules C1-C6 (docs/spec.md section 9) and the
Flink 2.3 examples; they are NOT computed by the model (``tests/conflict/test_scenarios.py``
checks the model against them, :class:`~.suite.ConflictMaterializerTests` every
implementation). A line is a change or an ``int`` watermark; the end of the input is one more
watermark, at line index ``len(lines)``. Expected outputs are ``(line index, change)`` in order
(the ``in`` of ``upsertmat replay``'s output).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...spec import Change, ConflictBehavior, Keys, delete, insert, update_after, update_before

NO_UK = Keys(pk=(0,))
UK = Keys(pk=(0,), upsert_key=(1,))
Line = Change | int
Emitted = tuple[tuple[int, Change], ...]


@dataclass(frozen=True)
class ConflictScenario:
    """Inputs and the expected emissions under NOTHING and ERROR.

    ``error_at``: the line index (``len(lines)`` = the end) whose watermark fails under ERROR,
    or None; ``error`` lists what ERROR emits before that. ``misses``: ``retract_misses`` after
    the end under NOTHING (and under ERROR when it does not fail).
    """

    name: str
    keys: Keys
    lines: tuple[Line, ...]
    nothing: Emitted
    error: Emitted
    error_at: int | None = None
    misses: int = 0

    def expected(self, behavior: ConflictBehavior) -> tuple[Emitted, int | None]:
        """The emissions and the failing line index under ``behavior``."""
        if behavior is ConflictBehavior.NOTHING:
            return self.nothing, None
        return self.error, self.error_at


def _same(
    name: str, keys: Keys, lines: tuple[Line, ...], emitted: Emitted, misses: int = 0
) -> ConflictScenario:
    """A scenario without conflicts: NOTHING and ERROR emit alike."""
    return ConflictScenario(name, keys, lines, emitted, emitted, None, misses)


A, B, C = (1, 10, "a"), (1, 20, "b"), (1, 30, "c")

CONFLICT_SCENARIOS: tuple[ConflictScenario, ...] = (
    _same(
        "order A: +I a -U a +U b",
        NO_UK,
        (insert(*A), update_before(*A), update_after(*B)),
        ((3, insert(*B)),),
    ),
    _same(
        "order B: +I a +U b -U a",
        NO_UK,
        (insert(*A), update_after(*B), update_before(*A)),
        ((3, insert(*B)),),
    ),
    _same(
        "order C: +U b +I a -U a",
        NO_UK,
        (update_after(*B), insert(*A), update_before(*A)),
        ((3, insert(*B)),),
    ),
    ConflictScenario(
        "two live rows",
        NO_UK,
        (insert(*A), insert(*B)),
        nothing=((2, insert(*A)),),
        error=(),
        error_at=2,
    ),
    _same(
        "a delete of everything emits the stored row",
        NO_UK,
        (insert(*A), 1, delete(*A), 2),
        ((1, insert(*A)), (3, delete(*A))),
    ),
    _same(
        "a delete matched by upsert key carries the stored row",
        UK,
        (insert(1, "u", "a"), 1, delete(1, "u", "x"), 2),
        ((1, insert(1, "u", "a")), (3, delete(1, "u", "a"))),
    ),
    _same(
        "an unchanged value emits nothing",
        NO_UK,
        (insert(*A), 1, update_before(*A), update_after(*B), update_before(*B), update_after(*A), 2),
        ((1, insert(*A)),),
    ),
    _same(
        "an upsert-key replacement by an equal row emits nothing",
        UK,
        (insert(1, "u", "a"), 1, update_after(1, "u", "a"), 2),
        ((1, insert(1, "u", "a")),),
    ),
    _same(
        "an upsert-key update emits one +U",
        UK,
        (insert(1, "u", "a"), 1, update_before(1, "u", "a"), update_after(1, "u", "b"), 2),
        ((1, insert(1, "u", "a")), (4, update_after(1, "u", "b"))),
    ),
    _same(
        "a bare +U with an upsert key replaces in place",
        UK,
        (insert(1, "u", "a"), update_after(1, "u", "b")),
        ((2, insert(1, "u", "b")),),
    ),
    ConflictScenario(
        "NOTHING keeps the current row and forgets the second",
        NO_UK,
        (insert(*A), 1, insert(*B), 2, update_before(*B), 3),
        nothing=((1, insert(*A)),),
        error=((1, insert(*A)),),
        error_at=3,
        misses=1,
    ),
    ConflictScenario(
        "NOTHING keeps a retracted current row when two others survive",
        NO_UK,
        (insert(*A), 1, update_before(*A), insert(*B), insert(*C), 2),
        nothing=((1, insert(*A)),),
        error=((1, insert(*A)),),
        error_at=5,
    ),
    _same(
        "emissions ascend by canonical context key",
        NO_UK,
        (insert(2, "x"), insert(1, "x"), insert("1", "x"), insert(1.0, "x")),
        ((4, insert("1", "x")), (4, insert(1.0, "x")), (4, insert(1, "x")), (4, insert(2, "x"))),
    ),
    _same(
        "only a newer time is a watermark",
        NO_UK,
        (5, insert(*A), 5, 3, insert(2, 0, "x"), 6),
        ((5, insert(*A)), (5, insert(2, 0, "x"))),
    ),
    _same("a retraction of nothing is a miss", NO_UK, (delete(*A),), (), misses=1),
    _same(
        "cancellation is type-exact",
        NO_UK,
        (insert(1, 1), update_before(1, 1.0)),
        ((2, insert(1, 1)),),
        misses=1,
    ),
    _same(
        "cancellation is one for one",
        NO_UK,
        (insert(*A), insert(*A), update_before(*A)),
        ((3, insert(*A)),),
    ),
    _same(
        "a retraction before its add cancels within the interval",
        NO_UK,
        (delete(*A), insert(*A)),
        (),
    ),
    _same(
        "cancellation compares whole rows, not upsert keys",
        UK,
        (insert(1, "u", "a"), update_before(1, "u", "b")),
        (),
    ),
    _same(
        "keys without pending changes are untouched",
        NO_UK,
        (insert(*A), insert(2, 0, "x"), 1, update_before(2, 0, "x"), update_after(2, 1, "y"), 2),
        ((2, insert(*A)), (2, insert(2, 0, "x")), (5, update_after(2, 1, "y"))),
    ),
)
