"""The keyed-state backend suite: a backend's test file subclasses :class:`StateBackendTests`.

Shipped with the package (``from upsertmat.conformance.backends import StateBackendTests``), so
a third-party ``StateBackend`` is tested the way the built-in heap, RocksDB and LMDB backends are.

A subclass sets ``persistent`` and implements ``open(path)``. Persistent (byte) backends also
run the reopen, durability and codec checks. Contexts and user keys of any length must work
(the long-key checks cross LMDB's 511-byte key limit); a backend whose sorted maps only hold
short user keys under long contexts (LMDB: the strategies store 8-byte sequence numbers and
timer keys of at most 272 bytes there) sets ``long_sorted_user_keys = False``. The Hypothesis
machine (``machine_for``) compares a backend with a pure-dict model through puts, deletes,
clears, commits and (persistent backends) close-and-reopen, where uncommitted writes must
vanish.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from upsertmat.impls.settings import Backend, Settings
from upsertmat.impls.state import (
    CorruptStateError,
    SortedMapState,
    StateBackend,
    StateLockedError,
    open_backend,
)

Opener = Callable[[Path | None], StateBackend]


def same(left: Any, right: Any) -> bool:
    """Type-exact deep equality (``1``, ``1.0`` and ``True`` differ; lists vs lists only)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list):
        return len(left) == len(right) and all(same(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same(v, right[k]) for k, v in left.items())
    return bool(left == right)


# Keys chosen to be prefixes of each other, to hold 0x00 and 0xff, and to be empty.
TRICKY_KEYS = [b"", b"\x00", b"a", b"a\x00", b"a\xff", b"ab", b"b", b"\xff", b"\xff\xff"]
TRICKY_CONTEXTS = [b"", b"a", b"a\x00", b"ab", b"\x00", b"\xff", b"[1]", b'["1"]']
# Lengths around LMDB's 511-byte key limit (one-letter state names: a 3-byte state prefix, so
# value keys fit up to 508 bytes of context, map keys up to 504 bytes of context + user key,
# sorted maps keep a context plain up to 496 bytes) and far beyond it.
LONG_LENGTHS = [300, 496, 497, 504, 505, 508, 509, 511, 512, 5000]


def long_keys(letter: bytes, lengths: list[int] = LONG_LENGTHS) -> list[bytes]:
    """Keys of each length, plus pairs that differ only in the last or the first byte."""
    keys = [letter * length for length in lengths]
    keys += [letter * 599 + b"\x00", letter * 599 + b"\xff", b"\x00" + letter * 599, letter * 600]
    return keys


LONG_CONTEXTS = long_keys(b"c")
MIXED_CONTEXTS = [b"", b"c", *LONG_CONTEXTS]
LONG_USER_KEYS = [b"", b"k", b"k" * 8, *long_keys(b"k", [200, 300, 504, 505, 511, 512, 5000])]
SHORT_SORTED_KEYS = [b"", b"\x00", b"a", b"a\x00", b"a\xff", b"ab", b"b", b"\xff", b"\xff" * 8, b"\x00" * 8]


class StateBackendTests:
    """Behaviour every ``StateBackend`` must have; subclasses supply ``open``."""

    persistent: ClassVar[bool] = False
    long_sorted_user_keys: ClassVar[bool] = True
    """False: sorted maps need only hold user keys of up to 8 bytes under contexts of any length."""

    def open(self, path: Path | None) -> StateBackend:
        """A backend on ``path`` (None: a temporary or in-memory one)."""
        raise NotImplementedError

    @pytest.fixture
    def backend(self, tmp_path: Path) -> Iterator[StateBackend]:
        backend = self.open(tmp_path / "state")
        yield backend
        backend.close()

    # ---- value state

    def test_value_state_point_calls(self, backend: StateBackend) -> None:
        state = backend.value_state("v")
        assert state.get(b"k") is None
        state.put(b"k", [1, "a"])
        assert state.get(b"k") == [1, "a"]
        state.put(b"k", 7)
        assert same(state.get(b"k"), 7)
        state.delete(b"k")
        assert state.get(b"k") is None
        state.delete(b"k")  # absent: no-op
        assert list(state.contexts()) == []

    def test_value_state_contexts_are_distinct(self, backend: StateBackend) -> None:
        state = backend.value_state("v")
        for index, context in enumerate(TRICKY_CONTEXTS):
            state.put(context, index)
        for index, context in enumerate(TRICKY_CONTEXTS):
            assert same(state.get(context), index)
        assert sorted(state.contexts()) == sorted(TRICKY_CONTEXTS)
        backend.commit()
        assert sorted(state.contexts()) == sorted(TRICKY_CONTEXTS)

    def test_falsy_values_are_not_absent(self, backend: StateBackend) -> None:
        state = backend.value_state("v")
        falsy: list[Any] = [0, False, "", [], {}, 0.0, b""]
        for value in falsy:
            state.put(b"k", value)
            assert same(state.get(b"k"), value)
            backend.commit()
            assert same(state.get(b"k"), value)

    # ---- map state

    def test_map_state_point_calls(self, backend: StateBackend) -> None:
        state = backend.map_state("m")
        assert state.get(b"c", b"k") is None
        state.put(b"c", b"k", "x")
        state.put(b"c", b"j", "y")
        assert state.get(b"c", b"k") == "x"
        assert dict(state.items(b"c")) == {b"k": "x", b"j": "y"}
        state.delete(b"c", b"k")
        state.delete(b"c", b"absent")
        assert dict(state.items(b"c")) == {b"j": "y"}
        state.clear(b"c")
        assert list(state.items(b"c")) == []
        assert list(state.contexts()) == []

    def test_map_contexts_never_interleave(self, backend: StateBackend) -> None:
        state = backend.map_state("m")
        for ci, context in enumerate(TRICKY_CONTEXTS):
            for ki, key in enumerate(TRICKY_KEYS):
                state.put(context, key, [ci, ki])
        for commit in (False, True):
            if commit:
                backend.commit()
            for ci, context in enumerate(TRICKY_CONTEXTS):
                assert dict(state.items(context)) == {key: [ci, ki] for ki, key in enumerate(TRICKY_KEYS)}
            assert sorted(state.contexts()) == sorted(TRICKY_CONTEXTS)
        state.clear(b"a")
        assert list(state.items(b"a")) == []
        assert len(dict(state.items(b"a\x00"))) == len(TRICKY_KEYS)
        assert len(dict(state.items(b"ab"))) == len(TRICKY_KEYS)
        assert len(dict(state.items(b""))) == len(TRICKY_KEYS)

    def test_states_are_separate_by_name(self, backend: StateBackend) -> None:
        first, second = backend.map_state("a"), backend.map_state("ab")
        values = backend.value_state("a\x00")
        first.put(b"c", b"k", 1)
        second.put(b"c", b"k", 2)
        values.put(b"c", 3)
        backend.commit()
        assert (first.get(b"c", b"k"), second.get(b"c", b"k"), values.get(b"c")) == (1, 2, 3)
        first.clear(b"c")
        assert second.get(b"c", b"k") == 2
        assert list(first.contexts()) == []
        assert list(second.contexts()) == [b"c"]

    def test_same_name_returns_the_same_state(self, backend: StateBackend) -> None:
        backend.map_state("m").put(b"c", b"k", 1)
        assert backend.map_state("m").get(b"c", b"k") == 1

    # ---- sorted map state

    def test_sorted_items_and_seeks(self, backend: StateBackend) -> None:
        if not backend.supports_ordered:
            pytest.skip("no ordered iteration")
        state = backend.sorted_map_state("s")
        assert state.last(b"c") is None and state.first(b"c") is None
        assert state.before(b"c", b"\xff") is None
        for index, key in enumerate(reversed(TRICKY_KEYS)):
            state.put(b"c", key, index)
        state.put(b"b", b"zz", "other")
        state.put(b"c\x00", b"", "other")
        expected = sorted(TRICKY_KEYS)
        for commit in (False, True):
            if commit:
                backend.commit()
            assert [key for key, _ in state.items(b"c")] == expected
            assert state.first(b"c") == (expected[0], len(expected) - 1)
            last = state.last(b"c")
            assert last is not None and last[0] == expected[-1]
            for position, key in enumerate(expected):
                found = state.before(b"c", key)
                assert (found[0] if found else None) == (expected[position - 1] if position else None)
                ceiling = state.ceiling(b"c", key)
                assert ceiling is not None and ceiling[0] == key
                above = state.ceiling(b"c", key + b"\x00")
                following = expected[position + 1] if position + 1 < len(expected) else None
                assert (above[0] if above else None) == following
            assert state.ceiling(b"c", b"\xff\xff\xff") is None
            assert state.before(b"c", b"\xff\xff\xff")[0] == b"\xff\xff"  # type: ignore[index]
            assert state.before(b"c", b"a\x00\x00")[0] == b"a\x00"  # type: ignore[index]

    @pytest.mark.parametrize("interleave", [False, True])
    def test_sorted_overlay_over_committed(self, backend: StateBackend, interleave: bool) -> None:
        """Pending deletes hide committed entries and pending puts show, for every seek."""
        if not backend.supports_ordered:
            pytest.skip("no ordered iteration")
        state = backend.sorted_map_state("s")
        neighbours = [b"b", b"c\x00", b"c\xff", b"d"]
        for key in (b"1", b"3", b"5", b"7"):
            state.put(b"c", key, key.decode())
            if interleave:
                for context in neighbours:
                    state.put(context, key, "n")
        backend.commit()
        state.delete(b"c", b"7")  # committed last deleted: last must fall back to 5
        assert state.last(b"c") == (b"5", "5")
        state.delete(b"c", b"5")
        assert state.last(b"c") == (b"3", "3")
        state.put(b"c", b"4", "4p")  # pending put between committed entries
        assert state.last(b"c") == (b"4", "4p")
        assert state.before(b"c", b"7") == (b"4", "4p")
        assert state.before(b"c", b"4") == (b"3", "3")
        state.delete(b"c", b"1")
        assert state.first(b"c") == (b"3", "3")
        state.put(b"c", b"0", "0p")
        assert state.first(b"c") == (b"0", "0p")
        state.delete(b"c", b"3")
        assert state.before(b"c", b"4") == (b"0", "0p")
        state.put(b"c", b"3", "3p")  # re-put of a pending-deleted committed key
        assert state.before(b"c", b"4") == (b"3", "3p")
        assert state.ceiling(b"c", b"1") == (b"3", "3p")  # skips the pending-deleted committed 1
        assert state.ceiling(b"c", b"4") == (b"4", "4p")
        assert state.ceiling(b"c", b"4\x00") is None  # committed 5 and 7 are pending-deleted
        state.put(b"c", b"9", "9p")
        assert state.ceiling(b"c", b"4\x00") == (b"9", "9p")
        state.delete(b"c", b"9")  # pending put then pending delete
        assert state.ceiling(b"c", b"4\x00") is None
        assert state.last(b"c") == (b"4", "4p")
        assert list(state.items(b"c")) == [(b"0", "0p"), (b"3", "3p"), (b"4", "4p")]
        for commit in (False, True):
            if commit:
                backend.commit()
            assert state.last(b"c") == (b"4", "4p")
            assert state.first(b"c") == (b"0", "0p")
            assert state.before(b"c", b"0") is None
            if interleave:
                for context in neighbours:
                    assert [key for key, _ in state.items(context)] == [b"1", b"3", b"5", b"7"]
                    assert state.last(context) == (b"7", "n")

    def test_sorted_clear_then_put(self, backend: StateBackend) -> None:
        if not backend.supports_ordered:
            pytest.skip("no ordered iteration")
        state = backend.sorted_map_state("s")
        for key in (b"1", b"2", b"3"):
            state.put(b"c", key, 0)
            state.put(b"d", key, 0)
        backend.commit()
        state.clear(b"c")
        assert state.last(b"c") is None and state.first(b"c") is None
        assert state.before(b"c", b"9") is None
        state.put(b"c", b"2", 1)
        assert state.last(b"c") == (b"2", 1) == state.first(b"c")
        assert list(state.items(b"c")) == [(b"2", 1)]
        assert state.last(b"d") == (b"3", 0)
        backend.commit()
        assert list(state.items(b"c")) == [(b"2", 1)]
        assert sorted(state.contexts()) == [b"c", b"d"]

    def test_sorted_state_is_a_map_state(self, backend: StateBackend) -> None:
        if not backend.supports_ordered:
            pytest.skip("no ordered iteration")
        state: SortedMapState = backend.sorted_map_state("s")
        state.put(b"c", b"k", {"x": [1, 2.5]})
        assert state.get(b"c", b"k") == {"x": [1, 2.5]}
        assert state.get(b"c", b"j") is None

    # ---- long contexts and user keys (LMDB's key limit is 511 bytes)

    def test_long_contexts_in_value_states(self, backend: StateBackend) -> None:
        state = backend.value_state("v")
        for index, context in enumerate(MIXED_CONTEXTS):
            state.put(context, [index, len(context)])
        for commit in (False, True):
            if commit:
                backend.commit()
            for index, context in enumerate(MIXED_CONTEXTS):
                assert state.get(context) == [index, len(context)]
                assert state.get(context + b"\x00") is None
            assert sorted(state.contexts()) == sorted(MIXED_CONTEXTS)
        for context in MIXED_CONTEXTS[::2]:
            state.put(context, "again")
            state.delete(context)
            state.delete(context)  # absent: no-op
        assert sorted(state.contexts()) == sorted(MIXED_CONTEXTS[1::2])
        backend.rollback()
        assert sorted(state.contexts()) == sorted(MIXED_CONTEXTS)
        assert [state.get(context) for context in MIXED_CONTEXTS[:3]] == [[0, 0], [1, 1], [2, 300]]

    def test_long_keys_in_map_states(self, backend: StateBackend) -> None:
        state = backend.map_state("m")
        contexts = MIXED_CONTEXTS
        for ci, context in enumerate(contexts):
            for ki, key in enumerate(LONG_USER_KEYS):
                state.put(context, key, [ci, ki])
        for commit in (False, True):
            if commit:
                backend.commit()
            for ci, context in enumerate(contexts):
                items = list(state.items(context))
                assert len(items) == len(LONG_USER_KEYS)  # every entry exactly once
                assert dict(items) == {key: [ci, ki] for ki, key in enumerate(LONG_USER_KEYS)}
                for ki, key in enumerate(LONG_USER_KEYS):
                    assert state.get(context, key) == [ci, ki]
                    assert state.get(context, key + b"\x00") is None
            assert sorted(state.contexts()) == sorted(contexts)
        context = contexts[-1]
        for key in LONG_USER_KEYS[::2]:
            state.delete(context, key)
            state.delete(context, key)
        assert {key for key, _ in state.items(context)} == set(LONG_USER_KEYS[1::2])
        state.clear(contexts[-2])
        assert list(state.items(contexts[-2])) == []
        assert sorted(state.contexts()) == sorted(contexts[:-2] + contexts[-1:])
        backend.rollback()
        assert sorted(state.contexts()) == sorted(contexts)
        assert len(list(state.items(context))) == len(LONG_USER_KEYS)
        for context in contexts:
            state.clear(context)
        assert list(state.contexts()) == []
        backend.commit()
        assert list(state.contexts()) == []

    def test_a_context_with_long_and_short_user_keys_is_listed_once(self, backend: StateBackend) -> None:
        state = backend.map_state("m")
        state.put(b"c", b"short", 1)
        state.put(b"c", b"k" * 600, 2)
        state.put(b"d", b"k" * 600, 3)
        assert list(state.contexts()) in ([b"c", b"d"], [b"d", b"c"])
        state.delete(b"c", b"short")
        assert sorted(state.contexts()) == [b"c", b"d"]
        state.clear(b"c")
        assert list(state.contexts()) == [b"d"]
        assert list(state.items(b"d")) == [(b"k" * 600, 3)]

    def test_long_contexts_in_sorted_maps(self, backend: StateBackend) -> None:
        if not backend.supports_ordered:
            pytest.skip("no ordered iteration")
        state = backend.sorted_map_state("s")
        keys = list(SHORT_SORTED_KEYS)
        if self.long_sorted_user_keys:
            keys += [b"k" * 300, b"k" * 300 + b"\x00", b"k" * 5000, b"\xff" * 600]
        expected = sorted(keys)
        for ci, context in enumerate(MIXED_CONTEXTS):
            for key in reversed(keys):
                state.put(context, key, [ci, key])
        for commit in (False, True):
            if commit:
                backend.commit()
            assert sorted(state.contexts()) == sorted(MIXED_CONTEXTS)
            for ci, context in enumerate(MIXED_CONTEXTS):
                assert [key for key, _ in state.items(context)] == expected
                assert state.first(context) == (expected[0], [ci, expected[0]])
                assert state.last(context) == (expected[-1], [ci, expected[-1]])
                for position, key in enumerate(expected):
                    assert state.get(context, key) == [ci, key]
                    below = state.before(context, key)
                    assert (below[0] if below else None) == (expected[position - 1] if position else None)
                    assert state.ceiling(context, key) == (key, [ci, key])
                    above = state.ceiling(context, key + b"\x00")
                    following = expected[position + 1] if position + 1 < len(expected) else None
                    assert (above[0] if above else None) == following
                    # bounds longer than any key LMDB can store
                    for far in (key + b"\x00" * 600, key + b"\xff" * 600):
                        above_far = state.ceiling(context, far)
                        assert (above_far[0] if above_far else None) == min(
                            (k for k in expected if k >= far), default=None
                        )
                        below_far = state.before(context, far)
                        assert (below_far[0] if below_far else None) == max(k for k in expected if k < far)
        context = MIXED_CONTEXTS[-1]
        for key in expected[::2]:
            state.delete(context, key)
        assert [key for key, _ in state.items(context)] == expected[1::2]
        assert state.first(context) == (expected[1], [len(MIXED_CONTEXTS) - 1, expected[1]])
        state.clear(MIXED_CONTEXTS[-2])
        assert state.last(MIXED_CONTEXTS[-2]) is None and list(state.items(MIXED_CONTEXTS[-2])) == []
        assert sorted(state.contexts()) == sorted(MIXED_CONTEXTS[:-2] + MIXED_CONTEXTS[-1:])
        backend.rollback()
        assert [key for key, _ in state.items(MIXED_CONTEXTS[-2])] == expected
        assert sorted(state.contexts()) == sorted(MIXED_CONTEXTS)

    def test_long_keys_survive_a_reopen(self, tmp_path: Path) -> None:
        if not self.persistent:
            pytest.skip("not persistent")
        long_context, long_key = b"c" * 5000, b"k" * 5000
        backend = self.open(tmp_path / "db")
        backend.value_state("v").put(long_context, 1)
        backend.map_state("m").put(long_context, long_key, 2)
        backend.map_state("m").put(b"c", long_key, 3)
        backend.sorted_map_state("s").put(long_context, b"\x01", 4)
        backend.commit()
        backend.value_state("v").put(long_context, "lost")  # never committed
        backend.map_state("m").put(long_context, long_key + b"!", "lost")
        backend.sorted_map_state("s").put(long_context, b"\x02", "lost")
        backend.close()
        backend = self.open(tmp_path / "db")
        try:
            assert list(backend.value_state("v").contexts()) == [long_context]
            assert backend.value_state("v").get(long_context) == 1
            assert list(backend.map_state("m").items(long_context)) == [(long_key, 2)]
            assert list(backend.map_state("m").items(b"c")) == [(long_key, 3)]
            assert sorted(backend.map_state("m").contexts()) == [b"c", long_context]
            assert backend.sorted_map_state("s").last(long_context) == (b"\x01", 4)
        finally:
            backend.close()

    # ---- persistence (byte backends)

    def test_reopen_sees_committed_writes_only(self, tmp_path: Path) -> None:
        if not self.persistent:
            pytest.skip("not persistent")
        backend = self.open(tmp_path / "db")
        backend.value_state("v").put(b"c", 1)
        backend.map_state("m").put(b"c", b"k", "kept")
        backend.sorted_map_state("s").put(b"c", b"\x01", "a")
        backend.commit()
        backend.value_state("v").put(b"c", 2)  # never committed
        backend.map_state("m").delete(b"c", b"k")
        backend.sorted_map_state("s").put(b"c", b"\x02", "lost")
        backend.close()
        backend = self.open(tmp_path / "db")
        try:
            assert backend.value_state("v").get(b"c") == 1
            assert backend.map_state("m").get(b"c", b"k") == "kept"
            assert backend.sorted_map_state("s").last(b"c") == (b"\x01", "a")
        finally:
            backend.close()

    def test_values_keep_their_exact_types(self, backend: StateBackend) -> None:
        values: list[Any] = [
            1, 1.0, True, False, None, 0, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**64, -(2**70), 10**40,
            -0.0, 1e300, "", "é\u0000x", b"", b"\x00\xff", [1, 1.0, True, None, "1", b"1"],
            [[[]], [1, [2.0, [None]]]], {"a": 1, "b": [1.0]}, {1: "int key", "1": "str key"},
        ]  # fmt: skip
        state = backend.value_state("v")
        for index, value in enumerate(values):
            state.put(index.to_bytes(2, "big"), value)
        for commit in (False, True):
            if commit:
                backend.commit()
            for index, value in enumerate(values):
                got = state.get(index.to_bytes(2, "big"))
                assert same(got, value), (value, got)

    def test_close_is_idempotent(self, tmp_path: Path) -> None:
        backend = self.open(tmp_path / "db")
        backend.close()
        backend.close()


class BackendMachine(RuleBasedStateMachine):
    """Compares a backend with a dict model; subclasses set ``persistent`` and define ``open``.

    Three copies of the model: ``model`` (every write), ``committed`` (at the last ``commit``:
    the end of a unit, what ``rollback`` returns to) and ``durable`` (at the last durable
    write, what ``reopen`` finds). A backend with a commit interval (``commit_interval`` > 1)
    writes durably at every N-th ``commit`` (``pending_units`` back at 0) and at
    ``checkpoint``; any other backend at every ``commit``.
    """

    persistent: ClassVar[bool] = False
    long_sorted_user_keys: ClassVar[bool] = True

    def open(self, path: Path) -> StateBackend:
        raise NotImplementedError

    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="upsertmat-state-"))
        self.backend = self.open(self.directory / "db")
        # model[(kind, context)] -> {key: value}; value states use key b"".
        self.model: dict[tuple[str, bytes], dict[bytes, Any]] = {}
        self.committed: dict[tuple[str, bytes], dict[bytes, Any]] = {}
        self.durable: dict[tuple[str, bytes], dict[bytes, Any]] = {}

    def _snapshot(self) -> dict[tuple[str, bytes], dict[bytes, Any]]:
        return {slot: dict(entries) for slot, entries in self.model.items()}

    def teardown(self) -> None:
        self.backend.close()
        shutil.rmtree(self.directory, ignore_errors=True)

    contexts = st.sampled_from([b"", b"a", b"a\x00", b"ab", b"b", b"L" * 600, b"L" * 599 + b"M", b"L" * 500])
    keys = st.sampled_from([b"", b"\x00", b"1", b"1\x00", b"2", b"\xff"])
    long_keys = st.sampled_from([b"K" * 600, b"K" * 599 + b"\x00", b"2" + b"K" * 520])
    any_keys = st.one_of(keys, long_keys)
    values = st.one_of(st.integers(-3, 3), st.booleans(), st.none(), st.text(max_size=2), st.floats(0, 1))
    kinds = st.sampled_from(["map", "sorted"])

    def _entries(self, kind: str, context: bytes) -> dict[bytes, Any]:
        return self.model.setdefault((kind, context), {})

    def _map(self, kind: str) -> Any:
        return self.backend.map_state("m") if kind == "map" else self.backend.sorted_map_state("s")

    @rule(kind=kinds, context=contexts, key=keys, value=values)
    def put(self, kind: str, context: bytes, key: bytes, value: Any) -> None:
        self._map(kind).put(context, key, value)
        self._entries(kind, context)[key] = value

    @rule(kind=kinds, context=contexts, key=long_keys, value=values)
    def put_long_key(self, kind: str, context: bytes, key: bytes, value: Any) -> None:
        if kind == "sorted" and not self.long_sorted_user_keys:
            kind = "map"
        self.put(kind, context, key, value)

    @rule(kind=kinds, context=contexts, key=any_keys)
    def delete(self, kind: str, context: bytes, key: bytes) -> None:
        self._map(kind).delete(context, key)
        self._entries(kind, context).pop(key, None)

    @rule(kind=kinds, context=contexts)
    def clear(self, kind: str, context: bytes) -> None:
        self._map(kind).clear(context)
        self._entries(kind, context).clear()

    @rule(context=contexts, value=values)
    def put_value(self, context: bytes, value: Any) -> None:
        self.backend.value_state("v").put(context, value)
        self._entries("value", context)[b""] = value

    @rule(context=contexts)
    def delete_value(self, context: bytes) -> None:
        self.backend.value_state("v").delete(context)
        self._entries("value", context).clear()

    @rule()
    def commit(self) -> None:
        self.backend.commit()
        self.committed = self._snapshot()
        if getattr(self.backend, "pending_units", 0) == 0:
            self.durable = self._snapshot()

    @rule()
    def checkpoint(self) -> None:
        """Every write so far becomes durable (and is no longer undone by ``rollback``)."""
        self.backend.checkpoint()
        self.committed = self.durable = self._snapshot()

    @rule()
    def rollback(self) -> None:
        """Every write since the last commit is undone, on every backend."""
        self.backend.rollback()
        self.model = {slot: dict(entries) for slot, entries in self.committed.items()}

    @precondition(lambda self: self.persistent)
    @rule()
    def reopen(self) -> None:
        """Close without committing: only durably committed writes survive."""
        self.backend.close()
        self.backend = self.open(self.directory / "db")
        self.model = {slot: dict(entries) for slot, entries in self.durable.items()}
        self.committed = self._snapshot()

    @rule(kind=kinds, context=contexts, key=any_keys)
    def get(self, kind: str, context: bytes, key: bytes) -> None:
        assert same(self._map(kind).get(context, key), self.model.get((kind, context), {}).get(key))

    @rule(context=contexts, key=any_keys)
    def seek(self, context: bytes, key: bytes) -> None:
        state = self.backend.sorted_map_state("s")
        entries = sorted(self.model.get(("sorted", context), {}).items())
        below = [entry for entry in entries if entry[0] < key]
        assert state.before(context, key) == (below[-1] if below else None)
        at_or_above = [entry for entry in entries if entry[0] >= key]
        assert state.ceiling(context, key) == (at_or_above[0] if at_or_above else None)
        assert state.last(context) == (entries[-1] if entries else None)
        assert state.first(context) == (entries[0] if entries else None)

    @rule(context=contexts, value=values)
    def append(self, context: bytes, value: Any) -> None:
        """A put above every key of the context (how SORTED adds its nodes)."""
        entries = self._entries("sorted", context)
        self.put("sorted", context, (max(entries) if entries else b"") + b"\x01", value)

    @rule(context=contexts)
    def ends(self, context: bytes) -> None:
        """``last`` and ``first`` alone (SORTED's reads; ``seek`` also bisects)."""
        state = self.backend.sorted_map_state("s")
        entries = sorted(self.model.get(("sorted", context), {}).items())
        assert state.last(context) == (entries[-1] if entries else None)
        assert state.first(context) == (entries[0] if entries else None)

    @invariant()
    def same_contents(self) -> None:
        for kind in ("map", "sorted", "value"):
            expected = {context for (k, context), entries in self.model.items() if k == kind and entries}
            if kind == "value":
                value_state = self.backend.value_state("v")
                assert set(value_state.contexts()) == expected
                for context in expected:
                    assert same(value_state.get(context), self.model[("value", context)][b""])
                continue
            state = self._map(kind)
            assert set(state.contexts()) == expected
            for context in expected:
                items = list(state.items(context))
                wanted = self.model[(kind, context)]
                assert len(items) == len(wanted)
                assert all(same(value, wanted[key]) for key, value in items)
                if kind == "sorted":
                    assert [key for key, _ in items] == sorted(wanted)
        check = getattr(self.backend.sorted_map_state("s"), "_check", None)
        if check is not None:  # a backend's own invariants of its sorted map, where it has them
            check()


def machine_for(
    opener: Opener, *, persistent: bool, long_sorted_user_keys: bool = True
) -> type[BackendMachine]:
    """A ``BackendMachine`` subclass for one backend (use its ``TestCase`` in a test file).

    ``long_sorted_user_keys=False``: long user keys go to map states only (see
    ``StateBackendTests.long_sorted_user_keys``)."""
    reopens, long_sorted = persistent, long_sorted_user_keys

    class Machine(BackendMachine):
        persistent = reopens
        long_sorted_user_keys = long_sorted

        def open(self, path: Path) -> StateBackend:
            return opener(path)

    Machine.TestCase.settings = settings(stateful_step_count=30, deadline=None)
    return Machine


_WRITER = """
import sys
from pathlib import Path
from upsertmat.impls.settings import Backend, Settings
from upsertmat.impls.state import open_backend
from upsertmat.impls.state.codec import encode_seq

backend = open_backend(Settings(backend=Backend(sys.argv[1]), state_dir=Path(sys.argv[2])))
counter, rows, order = backend.value_state("n"), backend.map_state("m"), backend.sorted_map_state("s")
start = (counter.get(b"c") or 0) + 1
print("ready", start, flush=True)
for n in range(start, start + 10**9):
    counter.put(b"c", n)
    for key in (b"a", b"b", b"c"):
        rows.put(b"c", key, [n, "x" * 100])
    order.put(b"c", encode_seq(n), n)
    order.delete(b"c", encode_seq(n - 3))
    backend.commit()
    print(n, flush=True)
"""


class PersistentBackendTests:
    """Locking, validation and kill-safety of byte backends (mixed in with StateBackendTests)."""

    engine: ClassVar[str]

    def open(self, path: Path | None) -> StateBackend:
        raise NotImplementedError

    def _settings(self, state_dir: Path) -> Settings:
        return Settings(backend=Backend(self.engine), state_dir=state_dir)

    def test_second_backend_on_a_directory_is_refused(self, tmp_path: Path) -> None:
        backend = self.open(tmp_path / "db")
        try:
            with pytest.raises(StateLockedError, match=str(tmp_path / "db")):
                self.open(tmp_path / "db")
        finally:
            backend.close()
        self.open(tmp_path / "db").close()  # released on close

    def test_second_process_is_refused(self, tmp_path: Path) -> None:
        backend = open_backend(self._settings(tmp_path))
        try:
            child = subprocess.run(
                [sys.executable, "-c", _WRITER, self.engine, str(tmp_path)],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            backend.close()
        assert child.returncode != 0
        assert "StateLockedError" in child.stderr
        assert str(tmp_path / self.engine / "materializer") in child.stderr

    def test_foreign_directory_is_refused(self, tmp_path: Path) -> None:
        (tmp_path / "db").mkdir()
        (tmp_path / "db" / "notes.txt").write_text("mine")
        with pytest.raises(CorruptStateError, match=str(tmp_path / "db")):
            self.open(tmp_path / "db")
        (tmp_path / "file").write_text("x")
        with pytest.raises(CorruptStateError, match="not a directory"):
            self.open(tmp_path / "file")

    def test_corrupt_database_is_refused(self, tmp_path: Path) -> None:
        backend = self.open(tmp_path / "db")
        backend.value_state("v").put(b"c", 1)
        backend.commit()
        backend.close()
        for file in (tmp_path / "db" / "db").iterdir():
            if file.is_file():
                file.write_bytes(b"garbage" * 1000)
        with pytest.raises(CorruptStateError, match=str(tmp_path / "db")):
            self.open(tmp_path / "db")
        self.open(tmp_path / "elsewhere").close()  # the lock of the failed open was released

    def test_sigkill_leaves_a_committed_prefix(self, tmp_path: Path) -> None:
        """Kill a writer at several points; each reopen sees exactly some whole committed batch."""
        last_printed = 0
        for delay in (0.05, 0.3, 0.0, 0.6):
            child = subprocess.Popen(
                [sys.executable, "-c", _WRITER, self.engine, str(tmp_path)],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                text=True,
            )
            assert child.stdout is not None
            assert child.stdout.readline().startswith("ready")
            time.sleep(delay)
            os.kill(child.pid, signal.SIGKILL)
            printed = [int(line) for line in child.stdout.read().split()]
            child.wait()
            last_printed = max([last_printed, *printed])
            backend = open_backend(self._settings(tmp_path))
            try:
                n = backend.value_state("n").get(b"c") or 0
                assert n >= last_printed  # nothing acknowledged is lost
                rows = backend.map_state("m")
                assert dict(rows.items(b"c")) == (
                    {key: [n, "x" * 100] for key in (b"a", b"b", b"c")} if n else {}
                )
                order = backend.sorted_map_state("s")
                assert [value for _, value in order.items(b"c")] == list(range(max(1, n - 2), n + 1))
                last = order.last(b"c")
                assert (last[1] if last else 0) == n
            finally:
                backend.close()
        assert last_printed > 0
