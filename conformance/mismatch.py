"""The failure every check raises: an AssertionError that carries its counterexample and says
which rule of docs/spec.md it breaks.

The fields let tools (the conformance report) replay the counterexample; the message is what a
person reads, in pytest's output as in the report. Its first line (:func:`diagnose`) names the
rule that decides the expected output of the failing input (:func:`rules_broken`, found by
replaying the model on the inputs); or, under TTL, says that expiry decides it and, when the
implementation behaves as if TTL were off, how to declare :class:`~upsertmat.spec.Unsupported`
(:func:`ttl_diagnosis`); or names what else broke (a state move). It is computed once, when the
message is first read (never while Hypothesis shrinks): a model replay or two, O(inputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from ..spec import Change, Granularity, Keys, ModelMaterializer, RowKind, TtlSettings, canonical
from .generators import Advance, Step

RULES: dict[int, str] = {
    1: "`+I`/`+U` are ADD, `-U`/`-D` RETRACT; the kind has no other effect",
    2: "match by upsert-key projection, else by whole row",
    3: "ADD without upsert key appends (multiset)",
    4: "ADD with upsert key replaces the first match in place",
    5: "every ADD emits the incoming row, `+I` into empty state, else `+U`",
    6: "RETRACT removes the first match in insertion order",
    7: "RETRACT without match: nothing emitted or changed, counted",
    8: "RETRACT emptying the key emits `-D` with the incoming row's values",
    9: "RETRACT of the last element emits `+U` of the new last",
    10: "RETRACT of a non-last element emits nothing",
    11: "0 or 1 output per input, only `+I`, `+U`, `-D`",
}
"""The rules of docs/spec.md section 3, one line each (rule 12, convergence, follows from them)."""

TTL_HINT = (
    "if it does not support TTL, declare it: raise upsertmat.spec.Unsupported from the factory "
    "when settings.ttl.enabled (a program: exit with code 2 on --set table.exec.state.ttl=...), "
    "and the TTL tests are skipped (docs/conformance.md, 'Declaring what your implementation "
    "does not support')"
)


class Differs(Enum):
    """What the implementation got wrong at the last input of a :class:`Mismatch`."""

    OUTPUT = "output"
    """Its output (or an output on a clock line)."""
    CRASH = "crash"
    """It raised instead of answering (the exception is the mismatch's ``__cause__``)."""
    MISSES = "misses"
    """``retract_misses`` (rule 7), the outputs being equal."""
    STATE = "state"
    """Its stored rows or stamps (``HistoryAccess``/``StateTransfer``), the outputs being equal."""


class Mismatch(AssertionError):
    """An implementation differs from the expected behaviour at the last of ``steps``.

    ``steps``: every input fed to it so far, the failing one last (clock advances included);
    ``actual``: what it emitted for that input (``actual_ops``: their ops), ``expected``: what
    it should have emitted (both None when unknown); ``misses``: (expected, actual)
    ``retract_misses`` after the last input, when they differ; ``ttl`` and
    ``granularity``: the model configuration the expectation came from (None: no TTL);
    ``differs``: what differed; ``rules``: the deciding rules when the raiser computed them
    itself (a state machine whose model moved between granularities cannot be replayed from
    the inputs alone), else None (:func:`rules_broken` replays the model); ``breaks``: what
    the failure breaks when it is none of rules 1-11 (TTL stamps, a state move); ``replayable``:
    False when feeding ``steps`` to a fresh implementation is not the whole story (a state
    machine moved the state: checkpoint/restore, migration, rescaling); ``program``: the
    implementation is a program (``--upsertmat-cmd``), which changes the hint.
    """

    def __init__(
        self,
        message: str,
        *,
        keys: Keys,
        steps: Sequence[Step],
        actual_ops: Sequence[str] = (),
        actual: Sequence[Change] | None = None,
        expected: Sequence[Change] | None = None,
        misses: tuple[int, int] | None = None,
        ttl: TtlSettings | None = None,
        granularity: Granularity = Granularity.PER_ELEMENT,
        differs: Differs = Differs.OUTPUT,
        rules: Sequence[int] | None = None,
        breaks: str | None = None,
        replayable: bool = True,
        program: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.keys = keys
        self.steps = tuple(steps)
        self.actual = None if actual is None else tuple(actual)
        self.actual_ops = tuple(actual_ops) if actual is None else tuple(c.kind.value for c in actual)
        self.expected = None if expected is None else tuple(expected)
        self.misses = misses
        self.ttl = ttl
        self.granularity = granularity
        self.differs = differs
        self.given_rules = None if rules is None else tuple(rules)
        self.breaks = breaks
        self.replayable = replayable
        self.program = program
        self._diagnosis: Diagnosis | None = None

    @property
    def diagnosis(self) -> Diagnosis:
        """:func:`diagnose`, computed once (when first read). Should the model replay itself
        fail, the diagnosis says so rather than hide the failure it explains."""
        if self._diagnosis is None:
            try:
                self._diagnosis = diagnose(self)
            except Exception as error:  # never let the explanation mask the failure
                self._diagnosis = Diagnosis(breaks=f"(no diagnosis: {type(error).__name__}: {error})")
        return self._diagnosis

    @property
    def verdict(self) -> str:
        """The first line of the message: the rule broken, or what else."""
        return self.diagnosis.verdict

    def __str__(self) -> str:
        return f"{self.verdict}\n{self.message}"


def _before_last(mismatch: Mismatch, ttl: TtlSettings | None) -> ModelMaterializer:
    """The model (``ttl``, the mismatch's granularity) fed every input but the last."""
    model = ModelMaterializer(mismatch.keys, ttl, mismatch.granularity)
    for step in mismatch.steps[:-1]:
        if isinstance(step, Advance):
            model.advance_time(step.time)
        else:
            model.process(step)
    return model


def deciding_rules(
    change: Change, *, missed: bool, expected: Change | None, actual_ops: Sequence[str]
) -> tuple[int, ...]:
    """The rule that decides the expected output of ``change``: for an ADD rule 5 (a
    replacement in place, rule 4, emits by rule 5 too); for a RETRACT 7 (``missed``), 8, 9 or
    10 (by the ``expected`` output); plus 11 when the implementation emitted more than one
    change or another kind than ``+I``, ``+U``, ``-D``."""
    rules: set[int] = set()
    if len(actual_ops) > 1 or set(actual_ops) - {"+I", "+U", "-D"}:
        rules.add(11)
    if change.kind.is_add:
        rules.add(5)
    elif missed:
        rules.add(7)
    else:
        rules.add(10 if expected is None else 8 if expected.kind is RowKind.DELETE else 9)
    return tuple(sorted(rules))


def state_rules(keys: Keys, change: Change, *, replaces: bool, missed: bool) -> tuple[int, ...]:
    """The rule that decides the stored state after ``change``: for an ADD 4 (``replaces``: an
    upsert-key match is stored) or 3; for a RETRACT 7 (``missed``) or 6."""
    if change.kind.is_add:
        return (4,) if replaces and keys.has_upsert_key else (3,)
    return (7,) if missed else (6,)


def stored_match(model: ModelMaterializer, keys: Keys, change: Change) -> bool:
    """Whether the model stores a row ``change`` matches (rule 2), before processing it."""
    wanted = keys.match_key(change.row)
    return any(keys.match_key(row) == wanted for row in model.history(keys.context_key(change.row)))


def rules_broken(mismatch: Mismatch) -> tuple[int, ...]:
    """The rule of docs/spec.md the mismatch breaks (see the module docstring).

    An output or a crash: the rule that decides the expected output of the failing input
    (:func:`deciding_rules`; a wrong match or placement, rules 2, 3, 4 and 6, shows as the
    emission rule of the input where it becomes visible); an output on a clock line: rule 11.
    A miss count: rule 7.
    Stored state (the outputs agreeing): the rule that decides the state after the last input,
    3 or 4 for an ADD, 6 or 7 for a RETRACT. Empty when nothing decides it (a crash on a clock
    line). O(inputs): one model replay.
    """
    if mismatch.given_rules is not None:
        return mismatch.given_rules
    if mismatch.differs is Differs.MISSES or not mismatch.steps:
        return (7,)
    last = mismatch.steps[-1]
    if isinstance(last, Advance):
        return () if mismatch.differs is Differs.CRASH else (11,)
    model = _before_last(mismatch, mismatch.ttl)
    replaces = stored_match(model, mismatch.keys, last) if last.kind.is_add else False
    misses = model.retract_misses
    expected = model.process(last)
    missed = model.retract_misses > misses
    if mismatch.differs is Differs.STATE:
        return state_rules(mismatch.keys, last, replaces=replaces, missed=missed)
    return deciding_rules(last, missed=missed, expected=expected, actual_ops=mismatch.actual_ops)


def _exact(changes: Sequence[Change | None]) -> list[tuple[str, bytes]]:
    return [(change.kind.value, canonical(change.row)) for change in changes if change is not None]


def untimed(mismatch: Mismatch) -> tuple[list[tuple[str, bytes]], int] | None:
    """What the model gives at the failing input with TTL off, for a mismatch under TTL: its
    output (exact) and its miss count after that input; None without TTL, or when the failing
    input is a clock line."""
    ttl = mismatch.ttl
    if ttl is None or not ttl.enabled or not mismatch.steps or not isinstance(mismatch.steps[-1], Change):
        return None
    model = _before_last(mismatch, None)
    output = model.process(mismatch.steps[-1])
    return _exact([output]), model.retract_misses


def ttl_diagnosis(mismatch: Mismatch) -> Diagnosis | None:
    """A mismatch under TTL whose expected output (or miss count) depends on expiry — the model
    with TTL off gives another — breaks TTL, not a rule of docs/spec.md: ``ttl_ignored`` when the
    implementation gave exactly what the model gives with TTL off (it behaves as if it had no
    TTL, as an implementation without TTL that forgot to declare it does; the verdict carries
    the hint to declare :class:`~upsertmat.spec.Unsupported`). None when expiry does not decide
    it (then the rules do, under TTL). O(inputs): one model replay."""
    found = untimed(mismatch)
    if found is None:
        return None
    output, misses = found
    assert mismatch.ttl is not None
    who = "the program" if mismatch.program else "the implementation"
    where = f"TTL (docs/ttl.md): under TTL ({describe_ttl(mismatch.ttl)})"
    if mismatch.differs is Differs.MISSES:
        if mismatch.misses is None or not mismatch.replayable:
            return None  # a state move restarts the implementation's count
        expected_misses, actual_misses = mismatch.misses
        if misses == expected_misses:
            return None
        if misses == actual_misses:
            return Diagnosis(
                breaks=f"{where} {who} counts misses as if it had no TTL; {TTL_HINT}", ttl_ignored=True
            )
        return Diagnosis(
            breaks=f"{where} expiry decides the miss count: {expected_misses} with TTL, {misses} without"
        )
    if mismatch.differs is not Differs.OUTPUT or mismatch.actual is None or mismatch.expected is None:
        return None
    if output == _exact(mismatch.expected):
        return None
    if _exact(mismatch.actual) == output:
        return Diagnosis(
            breaks=f"{where} {who} emits what the model emits with TTL off, as if it had no TTL; {TTL_HINT}",
            ttl_ignored=True,
        )
    return Diagnosis(
        breaks=f"{where} expiry decides this input's output (the model with TTL off emits another)"
    )


def describe_ttl(ttl: TtlSettings) -> str:
    """``ttl_ms=5, processing_time, on_create_and_write``."""
    return f"ttl_ms={ttl.ttl_ms}, {ttl.time_domain.value}, {ttl.update_type.value}"


@dataclass(frozen=True)
class Diagnosis:
    """What a mismatch breaks: ``rules`` of docs/spec.md, or ``breaks`` (what else: TTL, a state
    move), or neither (nothing decides it: a crash on a clock line). ``ttl_ignored``: the
    implementation behaves as if TTL were off (:func:`ttl_diagnosis`)."""

    rules: tuple[int, ...] = ()
    breaks: str = ""
    ttl_ignored: bool = False

    @property
    def verdict(self) -> str:
        """One line: ``breaks rule 9: ... (docs/spec.md)``, or ``breaks TTL ...``."""
        if self.breaks:
            return f"breaks {self.breaks}"
        if not self.rules:
            return "breaks no rule of docs/spec.md that can be named (a crash on a clock line)"
        named = "; ".join(f"rule {rule}: {RULES[rule]}" for rule in self.rules)
        return f"breaks {named} (docs/spec.md)"


def diagnose(mismatch: Mismatch) -> Diagnosis:
    """:func:`ttl_diagnosis` when expiry decides the failing input, else the raiser's
    ``breaks``, else :func:`rules_broken`."""
    if mismatch.breaks is None and (timed := ttl_diagnosis(mismatch)) is not None:
        return timed
    if mismatch.breaks is not None:
        return Diagnosis(breaks=mismatch.breaks)
    return Diagnosis(rules=rules_broken(mismatch))


def find_mismatch(error: BaseException) -> Mismatch | None:
    """``error`` if it is a :class:`Mismatch`, or the first one in its exception group (Hypothesis
    raises a group when it found several distinct failures)."""
    if isinstance(error, Mismatch):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = find_mismatch(inner)
            if found is not None:
                return found
    return None
