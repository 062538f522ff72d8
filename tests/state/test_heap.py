from __future__ import annotations

from pathlib import Path

from upsertmat.conformance.backends import StateBackendTests, machine_for
from upsertmat.impls.settings import Settings
from upsertmat.impls.state import HeapBackend, StateBackend, open_backend


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
