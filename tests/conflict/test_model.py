"""The compacting model (rules C1-C6) on the examples of docs/spec.md section 9, pinned exactly."""

from __future__ import annotations

import pytest

from upsertmat.spec import (
    Change,
    ConflictBehavior,
    ConflictError,
    ConflictModel,
    Keys,
    delete,
    insert,
    run_conflict_model,
    update_after,
    update_before,
)

PK = Keys(pk=(0,))
PK_UK = Keys(pk=(0,), upsert_key=(1,))
NOTHING, ERROR = ConflictBehavior.NOTHING, ConflictBehavior.ERROR
BOTH = pytest.mark.parametrize("behavior", [NOTHING, ERROR])


def at_end(keys: Keys, changes: list[Change], behavior: ConflictBehavior) -> list[Change]:
    """Everything is buffered; the end of input emits."""
    out = run_conflict_model(keys, changes, behavior)
    assert out[:-1] == [[] for _ in changes]
    return out[-1]


@BOTH
@pytest.mark.parametrize(
    "arrival",
    [
        [insert(1, 10, "a"), update_before(1, 10, "a"), update_after(1, 20, "b")],
        [insert(1, 10, "a"), update_after(1, 20, "b"), update_before(1, 10, "a")],
        [update_after(1, 20, "b"), insert(1, 10, "a"), update_before(1, 10, "a")],
    ],
)
def test_the_three_arrival_orders_give_one_insert(arrival: list[Change], behavior: ConflictBehavior) -> None:
    assert at_end(PK, arrival, behavior) == [insert(1, 20, "b")]


def test_two_live_rows_under_nothing_emit_the_first() -> None:
    assert at_end(PK, [insert(1, 10, "a"), insert(1, 20, "b")], NOTHING) == [insert(1, 10, "a")]


def test_two_live_rows_under_error_fail_naming_key_and_rows() -> None:
    with pytest.raises(ConflictError, match="Primary key constraint violation") as raised:
        run_conflict_model(PK, [insert(1, 10, "a"), insert(1, 20, "b")], ERROR)
    message = str(raised.value)
    assert "sink key [1]" in message and "[1, 10, 'a']" in message and "[1, 20, 'b']" in message
    assert raised.value.conflict.survivors == ((1, 10, "a"), (1, 20, "b"))
    assert raised.value.conflict.current is None


@BOTH
def test_a_delete_of_everything_emits_the_stored_row(behavior: ConflictBehavior) -> None:
    lines: list[Change | int] = [insert(1, 10, "a"), 1, delete(1, 10, "a"), 2]
    assert run_conflict_model(PK, lines, behavior) == [[], [insert(1, 10, "a")], [], [delete(1, 10, "a")], []]


@BOTH
def test_the_delete_carries_the_stored_row_when_matched_by_upsert_key(behavior: ConflictBehavior) -> None:
    lines: list[Change | int] = [insert(1, "u", "a"), 1, delete(1, "u", "other"), 2]
    assert run_conflict_model(PK_UK, lines, behavior)[3] == [delete(1, "u", "a")]


@BOTH
def test_an_unchanged_value_emits_nothing(behavior: ConflictBehavior) -> None:
    lines: list[Change | int] = [
        insert(1, 10, "a"),
        1,
        update_before(1, 10, "a"),
        update_after(1, 20, "b"),
        update_before(1, 20, "b"),
        update_after(1, 10, "a"),
        2,
    ]
    assert run_conflict_model(PK, lines, behavior) == [[], [insert(1, 10, "a")], [], [], [], [], [], []]


@BOTH
def test_an_upsert_key_replacement_to_the_same_row_emits_nothing(behavior: ConflictBehavior) -> None:
    lines: list[Change | int] = [insert(1, "u", "a"), 1, update_after(1, "u", "a"), 2]
    assert run_conflict_model(PK_UK, lines, behavior)[3] == []


@BOTH
def test_a_changed_value_emits_one_update(behavior: ConflictBehavior) -> None:
    lines: list[Change | int] = [insert(1, "u", "a"), 1, update_after(1, "u", "b"), 2]
    assert run_conflict_model(PK_UK, lines, behavior)[3] == [update_after(1, "u", "b")]


def test_nothing_keeps_the_current_row_when_a_second_one_arrives() -> None:
    model = ConflictModel(PK, NOTHING)
    model.process(insert(1, 10, "a"))
    assert model.advance_time(1) == [insert(1, 10, "a")]
    model.process(insert(1, 20, "b"))
    assert model.advance_time(2) == []
    assert model.current == {b"[1]": (1, 10, "a")}
    model.process(update_before(1, 20, "b"))  # b was dropped: a miss at the next compaction
    assert model.advance_time(3) == []
    assert model.retract_misses == 1


def test_a_failed_watermark_changes_nothing() -> None:
    model = ConflictModel(PK, ERROR)
    model.process(insert(1, 10, "a"))
    model.process(insert(2, 10, "a"))
    model.process(insert(2, 20, "b"))
    with pytest.raises(ConflictError):
        model.advance_time(1)
    assert model.current == {} and model.last_watermark is None
    assert model.stats() == {"keys": 0, "rows": 0, "pending_keys": 2, "pending": 3}


def test_skipped_conflicts_keep_current_and_are_reported() -> None:
    model = ConflictModel(PK, ERROR, skip_conflicts=True)
    for change in (insert(1, 10, "a"), insert(2, 10, "a"), insert(2, 20, "b")):
        model.process(change)
    assert model.advance_time(1) == [insert(1, 10, "a")]
    assert [conflict.context for conflict in model.conflicts] == [b"[2]"]
    assert model.stats() == {"keys": 1, "rows": 1, "pending_keys": 0, "pending": 0}


@BOTH
def test_emissions_are_ascending_by_canonical_context_key(behavior: ConflictBehavior) -> None:
    changes = [insert(2, 0, "x"), insert(1, 0, "x"), insert("1", 0, "x"), insert(1.0, 0, "x")]
    # canonical keys: [2], [1], ["1"], [1.0]; byte order: ["1"] < [1.0] < [1] < [2]
    assert at_end(PK, changes, behavior) == [changes[2], changes[3], changes[1], changes[0]]


def test_only_a_newer_time_is_a_watermark() -> None:
    model = ConflictModel(PK, NOTHING)
    assert model.advance_time(5) == []
    model.process(insert(1, 10, "a"))
    assert model.advance_time(5) == [] and model.advance_time(3) == []
    assert model.advance_time(6) == [insert(1, 10, "a")]


def test_a_first_watermark_at_zero_counts() -> None:
    model = ConflictModel(PK, NOTHING)
    model.process(insert(1, 10, "a"))
    assert model.advance_time(0) == [insert(1, 10, "a")]


def test_cancellation_compares_whole_rows_type_exactly() -> None:
    # -U(1,1.0) does not cancel +I(1,1): it is kept and misses at the compaction (no stored match).
    out = run_conflict_model(PK, [insert(1, 1), update_before(1, 1.0)], NOTHING)
    assert out[-1] == [insert(1, 1)]


def test_cancellation_ignores_the_upsert_key() -> None:
    # +I(1,u,a) -U(1,u,b): not identical, so no cancellation; the fold removes the match by upsert key.
    out = run_conflict_model(PK_UK, [insert(1, "u", "a"), update_before(1, "u", "b")], NOTHING)
    assert out[-1] == []


def test_an_add_cancels_a_pending_retract_of_the_identical_row() -> None:
    model = ConflictModel(PK, NOTHING)
    model.process(insert(1, 10, "a"))
    model.advance_time(1)
    model.process(update_before(1, 10, "a"))
    model.process(insert(1, 10, "a"))
    assert model.pending == {b"[1]": []}
    assert model.advance_time(2) == []


def test_deduplicate_is_not_modelled_here() -> None:
    with pytest.raises(ValueError, match="DEDUPLICATE"):
        ConflictModel(PK, ConflictBehavior.DEDUPLICATE)
