from __future__ import annotations

from pathlib import Path

from upsertmat.conformance.backends import StateBackendTests, machine_for
from upsertmat.impls.settings import Settings
from upsertmat.impls.state import HeapBackend, HeapSortedMapState, StateBackend, open_backend
from upsertmat.impls.state.heap import KEPT_RECORDS


def open_heap(path: Path | None) -> StateBackend:
    return HeapBackend()


class TestHeapBackend(StateBackendTests):
    def open(self, path: Path | None) -> StateBackend:
        return open_heap(path)


TestHeapMachine = machine_for(open_heap, persistent=False).TestCase


def test_open_backend_builds_heap_by_default() -> None:
    backend = open_backend(Settings())
    assert isinstance(backend, HeapBackend)
    assert backend.supports_ordered


def test_heap_values_are_kept_by_reference() -> None:
    state = HeapBackend().value_state("v")
    value = ("a", [1, 2])
    state.put(b"c", value)
    assert state.get(b"c") is value


def test_heap_hands_out_list_values_as_shallow_copies() -> None:
    """So a strategy may change a node in place before putting it again, and a rollback still
    restores the list the journal holds."""
    backend = HeapBackend()
    state = backend.map_state("m")
    node = [1, [2]]
    state.put(b"c", b"k", node)
    backend.commit()
    got = state.get(b"c", b"k")
    assert got == node and got is not node and got[1] is node[1]
    got[0] = 9
    state.put(b"c", b"k", got)
    backend.rollback()
    assert state.get(b"c", b"k") == [1, [2]]


def test_end_unit_commits_and_keeps_the_journal_buffer_until_it_fills() -> None:
    """``end_unit`` (the per-input loops' commit) keeps the committed undo records of units of
    one record below a mark instead of clearing the list; a rollback undoes only the records
    above it, and the list is cleared once more than KEPT_RECORDS would lie below the mark, or
    after a unit of several records."""
    backend = HeapBackend()
    state = backend.value_state("v")
    for unit in range(KEPT_RECORDS):
        state.put(b"c", unit)
        backend.end_unit()
        assert len(backend.journal) == unit + 1  # kept, committed
    state.put(b"c", "uncommitted")
    state.put(b"d", "uncommitted")
    backend.rollback()
    assert state.get(b"c") == KEPT_RECORDS - 1 and state.get(b"d") is None
    assert len(backend.journal) == KEPT_RECORDS
    state.put(b"c", "last")
    backend.end_unit()  # more than KEPT_RECORDS below the mark: cleared
    assert backend.journal == []
    backend.rollback()
    assert state.get(b"c") == "last"
    state.put(b"c", "again")
    backend.end_unit()
    backend.commit()  # a full commit clears what end_unit kept
    assert backend.journal == []
    state.put(b"c", 1)
    backend.end_unit()
    state.put(b"c", 2)
    state.put(b"d", 2)
    backend.end_unit()  # a unit of two records: cleared at once
    assert backend.journal == []


def test_sorted_map_contexts_stay_ascending_dicts_while_keys_ascend() -> None:
    """Appends, deletes anywhere, last and first keep a context a plain dict (no SortedDict
    upkeep); a put below the greatest live key, a bisection or a rollback that puts back a
    deleted key below it turns the context sorted. Contents and order are the same either way."""
    backend = HeapBackend()
    state = backend.sorted_map_state("s")
    assert isinstance(state, HeapSortedMapState)
    for seq in range(1, 200):
        state.put(b"c", seq.to_bytes(2, "big"), seq)
    for seq in range(1, 150):  # deletes from the front (the oldest rows) and from the end
        state.delete(b"c", seq.to_bytes(2, "big"))
        assert state.first(b"c") == ((seq + 1).to_bytes(2, "big"), seq + 1)
    for seq in range(199, 180, -1):
        state.delete(b"c", seq.to_bytes(2, "big"))
        assert state.last(b"c") == ((seq - 1).to_bytes(2, "big"), seq - 1)
    state.put(b"c", (181).to_bytes(2, "big"), "reused")  # a seq above the tail, reused
    assert state.last(b"c") == ((181).to_bytes(2, "big"), "reused")
    state._check()
    assert type(state._maps[b"c"]) is dict and len(state._orders[b"c"][0]) < 100  # compacted
    backend.commit()
    state.delete(b"c", (170).to_bytes(2, "big"))
    backend.rollback()  # puts 170 back below the greatest live key: sorted from now on
    state._check()
    assert b"c" not in state._orders
    assert [key for key, _ in state.items(b"c")] == sorted(key for key, _ in state.items(b"c"))
    assert len(list(state.items(b"c"))) == 181 - 150 + 1
    state.put(b"d", b"\x05", 5)
    state.put(b"d", b"\x03", 3)  # below the greatest: sorted
    assert b"d" not in state._orders and list(state.items(b"d")) == [(b"\x03", 3), (b"\x05", 5)]
    state.put(b"e", b"\x05", 5)
    assert state.ceiling(b"e", b"\x01") == (b"\x05", 5) and b"e" not in state._orders
    state._check()


def test_sorted_map_rollback_of_a_clear_restores_the_ascending_form() -> None:
    backend = HeapBackend()
    state = backend.sorted_map_state("s")
    for key in (b"\x01", b"\x02", b"\x03"):
        state.put(b"c", key, key)
    backend.commit()
    state.clear(b"c")
    assert state.last(b"c") is None
    backend.rollback()
    state._check()
    assert state.last(b"c") == (b"\x03", b"\x03") and state.first(b"c") == (b"\x01", b"\x01")
    state.put(b"c", b"\x04", 4)
    assert b"c" in state._orders and state.last(b"c") == (b"\x04", 4)
