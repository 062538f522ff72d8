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
    value = [1, 2]
    state.put(b"c", value)
    assert state.get(b"c") is value
