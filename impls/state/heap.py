"""Heap (Python object) keyed state: dicts of Python objects, nothing serialized.

Values are kept **by reference**, with one exception: a list value is handed out as a shallow
copy, so a strategy may change a node's fields in place and put it again without touching the
stored (and journaled) list. Nested lists are shared: code that changes them must copy them
first (VALUE's records do). Byte backends return decoded copies anyway.

Heap state is neither durable nor shared. It is transactional all the same, so an input that
raises half-way leaves no trace: every write first appends an undo record (the state, the key
and the value it replaces) to the backend's journal; ``commit`` empties the journal (O(1)
amortised), ``rollback`` replays it backwards (O(writes since the last commit)). One dict read
and one list append per write is the whole price.

A layout that changes a stored value in place instead of rewriting it (VALUE on heap:
:mod:`upsertmat.impls.strategies.value_heap`) reads it with :meth:`HeapValueState.stored`
(by reference) and first journals the inverse of each change with :meth:`HeapValueState.journal`:
O(1) per change where a rewrite would copy the value.

A layout may also write the dicts themselves (MAP's linked list on heap:
:mod:`upsertmat.impls.strategies.linked_map_heap`), skipping a method call per access:
:meth:`HeapValueState.table`, :meth:`HeapMapState.tables` and :attr:`HeapBackend.journal`.
Each such write must first append the :data:`UndoRecord` the state's own ``put``/``delete``
would append, ``(state, context, key or None, previous value or ABSENT)``, and must leave no
empty entries dict behind (a map state drops an emptied context).

**The journal** (:data:`Journal`) is a list of :data:`UndoRecord`, oldest first; one record
per write, appended *before* the write. ``rollback`` pops them newest first and calls
``owner.undo(context, key, previous)``, which puts back what that one write replaced. The
owners are the states themselves (``key`` None for a value state or a map state's
whole-context ``clear``; ``previous`` :data:`ABSENT` where the write found nothing) and, for a
change made in place to a stored value (:meth:`HeapValueState.journal`), an :class:`Undoer` of
the layout's own with the stored value as ``context`` and the change as ``key``. ``commit``
clears the list. The strategies' per-input loops end a unit with :meth:`HeapBackend.end_unit`
instead: after a unit that journaled at most one record it only moves the *committed mark*
(the records below it are never replayed), until more than :data:`KEPT_RECORDS` lie below it;
otherwise it clears the list. Clearing a list frees its buffer and the next input's first
write allocates a new one (a free, a malloc and the clear itself: ~140 instructions per input
on the compiled build, 7 % of a heap VALUE event, which journals one record per input). A
unit of several records clears at once: kept records would keep what they replaced (MAP's old
nodes and index entries) alive for several inputs, and the allocator would then hand out
colder memory (measured: 50 % more first-level cache misses per MAP event and a 10-20 %
slower MAP cell when every unit kept its records).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final, Protocol, TypeAlias

from mypy_extensions import mypyc_attr
from sortedcontainers import SortedDict  # type: ignore[import-untyped]

from .base import UserKey, Value
from .named import NamedStates

ABSENT: Final[Any] = object()  # undo record: the key had no value

KEPT_RECORDS: Final = 64
""":meth:`HeapBackend.end_unit` clears the journal once more committed records than this would
be kept (module docstring, *The journal*)."""


class Undoer(Protocol):
    """The owner of an :data:`UndoRecord`: a heap state, or a layout's reverter of in-place
    changes (:meth:`HeapValueState.journal`)."""

    def undo(self, context: Any, key: Any, previous: Any, /) -> None:
        """Put back what one journaled write replaced (rollback only; not journaled)."""


UndoRecord: TypeAlias = tuple[Undoer, Any, Any, Any]
"""One heap write's inverse, ``(owner, context, key, previous)`` (module docstring, *The
journal*): rollback calls ``owner.undo(context, key, previous)``. ``context`` is the state's
context key (for an in-place change, the stored value changed), ``key`` a map state's user key
(None: a value state, or a whole context; for an in-place change, the change), ``previous``
what the write replaced (:data:`ABSENT`: nothing). A tuple, not a class: measured on the
compiled build, building a native object per write instead of a 4-tuple (which CPython takes
from a free list) cost the heap cells 5-19% (MAP, SORTED and ADAPTIVE write several per
input); the alias types every field for mypy and mypyc alike."""

Journal = list[UndoRecord]
"""A heap backend's undo journal (module docstring, *The journal*)."""


def _detached(value: Value) -> Value:
    """A list value as a shallow copy (see the module docstring); anything else as it is."""
    return value.copy() if type(value) is list else value


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapValueState:
    """``ValueState`` in a dict: O(1) per call."""

    def __init__(self, journal: Journal | None = None) -> None:
        self._values: dict[bytes, Value] = {}
        self._journal: Journal = [] if journal is None else journal

    def get(self, context: bytes) -> Value | None:
        """O(1) (a shallow copy of a list value: O(its length), in C)."""
        value = self._values.get(context)
        return value.copy() if type(value) is list else value

    def stored(self, context: bytes) -> Value | None:
        """The stored value itself, not a copy: O(1). Change it in place only after
        journaling the change's inverse with :meth:`journal`, so a rollback can revert it."""
        return self._values.get(context)

    def table(self) -> dict[bytes, Value]:
        """The dict itself (context -> value), for direct writes (module docstring)."""
        return self._values

    def journal(self, undoer: Undoer, target: Any, change: Any) -> None:
        """Record an in-place change of ``target`` (a stored value): a rollback calls
        ``undoer.undo(target, change, None)``, newest first among all writes. O(1)."""
        self._journal.append((undoer, target, change, None))

    def get_many(self, contexts: Sequence[bytes]) -> list[Value | None]:
        """``[get(c) for c in contexts]``: O(1) each."""
        get = self._values.get
        return [get(context) for context in contexts]

    def put(self, context: bytes, value: Value) -> None:
        """O(1)."""
        values = self._values
        self._journal.append((self, context, None, values.get(context, ABSENT)))
        values[context] = value

    def delete(self, context: bytes) -> None:
        """O(1)."""
        previous = self._values.pop(context, ABSENT)
        if previous is not ABSENT:
            self._journal.append((self, context, None, previous))

    def undo(self, context: bytes, key: None, previous: Value) -> None:
        """Put back what one journal record replaced (rollback only; not journaled)."""
        if previous is ABSENT:
            self._values.pop(context, None)
        else:
            self._values[context] = previous

    def contexts(self) -> Iterator[bytes]:
        """Context keys in first-put order (a snapshot of the keys: O(n))."""
        return iter(list(self._values))


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapMapState:
    """``MapState`` as a dict of dicts (context -> user key -> value): O(1) per point call."""

    def __init__(self, journal: Journal | None = None) -> None:
        self._maps: dict[bytes, dict[UserKey, Value]] = {}
        self._journal: Journal = [] if journal is None else journal

    def get(self, context: bytes, key: UserKey) -> Value | None:
        """O(1) (a list value is a shallow copy)."""
        entries = self._maps.get(context)
        if entries is None:
            return None
        value = entries.get(key)
        return value.copy() if type(value) is list else value

    def tables(self) -> dict[bytes, dict[UserKey, Value]]:
        """The dicts themselves (context -> key -> value), for direct writes (module docstring)."""
        return self._maps

    def get_many(self, pairs: Sequence[tuple[bytes, bytes]]) -> list[Value | None]:
        """``[get(c, k) for c, k in pairs]``: O(1) each."""
        return [self.get(context, key) for context, key in pairs]

    def put(self, context: bytes, key: UserKey, value: Value) -> None:
        """O(1)."""
        entries = self._maps.get(context)
        if entries is None:
            self._journal.append((self, context, key, ABSENT))
            self._maps[context] = {key: value}
        else:
            self._journal.append((self, context, key, entries.get(key, ABSENT)))
            entries[key] = value

    def delete(self, context: bytes, key: UserKey) -> None:
        """O(1); an emptied context is dropped."""
        entries = self._maps.get(context)
        if entries is not None and key in entries:
            self._journal.append((self, context, key, entries.pop(key)))
            if not entries:
                del self._maps[context]

    def undo(self, context: bytes, key: UserKey | None, previous: Value) -> None:
        """Put back what one journal record replaced (rollback only; not journaled)."""
        if key is None:  # a clear: the whole context comes back
            self._maps[context] = previous
            return
        entries = self._maps.get(context)
        if previous is ABSENT:
            if entries is not None:
                entries.pop(key, None)
                if not entries:
                    del self._maps[context]
            return
        if entries is None:
            entries = self._maps[context] = self._new_entries()
        entries[key] = previous

    def _new_entries(self) -> dict[UserKey, Value]:
        return {}

    def items(self, context: bytes) -> Iterator[tuple[UserKey, Value]]:
        """Entries in first-put order (a snapshot: O(entries of ``context``))."""
        return iter([(key, _detached(value)) for key, value in self._maps.get(context, {}).items()])

    def clear(self, context: bytes) -> None:
        """O(1)."""
        previous = self._maps.pop(context, None)
        if previous is not None:
            self._journal.append((self, context, None, previous))

    def contexts(self) -> Iterator[bytes]:
        """Context keys with at least one entry (a snapshot: O(contexts))."""
        return iter(list(self._maps))


def live_tail(entries: dict[UserKey, Value], keys: list[UserKey]) -> UserKey:
    """The greatest live key of a non-empty ascending context (:class:`HeapSortedMapState`):
    deleted keys are popped off the end of ``keys`` first, each once (amortised O(1))."""
    while keys[-1] not in entries:
        keys.pop()
    return keys[-1]


def compact(entries: dict[UserKey, Value], order: list[Any]) -> None:
    """Rebuild an ascending context's ``keys`` (:class:`HeapSortedMapState`) once it holds more
    deleted keys than live ones (plus 32): amortised O(1) per delete."""
    if len(order[0]) - order[1] > 2 * len(entries) + 32:
        order[0] = list(entries)  # insertion order is ascending key order
        order[1] = 0


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapSortedMapState(HeapMapState):
    """``SortedMapState`` on dicts, in one of two forms per context key.

    *Ascending* (every context starts so): a plain dict whose insertion order is ascending key
    order, plus ``keys``, the keys in ascending order with deleted ones left in place (lazy
    deletion) and ``head``, the index below which every key is deleted. A put of a new key
    above every live key appends to both (SORTED's appends take the tail's seq + 1, and a seq
    above the tail is only reused after the tail is gone, so its nodes stay ascending); a
    delete only pops the dict. ``last`` pops deleted keys off the end of ``keys`` and
    ``first`` advances ``head`` past deleted ones, each key once; ``keys`` is rebuilt from the
    dict when it holds more deleted keys than live ones (plus 32). So ``get``, ``put``,
    ``delete``, ``last`` and ``first`` are O(1) amortised, with no sorted-container upkeep.

    *Sorted*: a sortedcontainers ``SortedDict``. A context turns sorted, once and for good
    (O(n log n)), on the first put of a new key below its greatest live key, the first
    ``before`` or ``ceiling`` (bisections), or a rollback that puts back a deleted key below
    it. Then ``put``/``delete`` are O(log n), ``get`` O(1), ``last``/``first`` O(1) amortised
    (``peekitem``), ``before``/``ceiling`` O(log n). TTL timers (ceiling seeks) live sorted.

    Both forms iterate in ascending key order (``items``, HeapMapState's), so the layouts see
    one sorted map either way.
    """

    _maps: dict[bytes, Any]  # context -> dict (ascending) or SortedDict (sorted)

    def __init__(self, journal: Journal | None = None) -> None:
        super().__init__(journal)
        # context -> [keys, head] for the contexts in the ascending form (see the class docstring)
        self._orders: dict[bytes, list[Any]] = {}

    def put(self, context: bytes, key: UserKey, value: Value) -> None:
        """O(1) amortised (ascending form), O(log n) (sorted form)."""
        entries = self._maps.get(context)
        if entries is None:
            self._journal.append((self, context, key, ABSENT))
            self._maps[context] = {key: value}
            self._orders[context] = [[key], 0]
            return
        previous = entries.get(key, ABSENT)
        if previous is ABSENT:
            order = self._orders.get(context)
            if order is not None:
                keys = order[0]
                if key > live_tail(entries, keys):
                    keys.append(key)
                else:
                    entries = self._to_sorted(context)
        self._journal.append((self, context, key, previous))
        entries[key] = value

    def delete(self, context: bytes, key: UserKey) -> None:
        """O(1) amortised; an emptied context is dropped."""
        entries = self._maps.get(context)
        if entries is None or key not in entries:
            return
        self._journal.append((self, context, key, entries.pop(key)))
        if not entries:
            del self._maps[context]
            self._orders.pop(context, None)
            return
        order = self._orders.get(context)
        if order is not None:
            compact(entries, order)

    def clear(self, context: bytes) -> None:
        """O(1)."""
        super().clear(context)
        self._orders.pop(context, None)

    def undo(self, context: bytes, key: UserKey | None, previous: Value) -> None:
        """HeapMapState's undo, keeping the forms: a deleted key put back below the greatest
        live key of an ascending context turns it sorted first; afterwards an ascending
        context's key list is made whole again (O(n), on rollback only)."""
        order = self._orders.get(context)
        if order is not None and key is not None and previous is not ABSENT:
            entries = self._maps[context]
            if key not in entries and key < max(entries):
                self._to_sorted(context)
        super().undo(context, key, previous)
        entries = self._maps.get(context)
        if type(entries) is dict:  # insertion order is ascending key order
            if key is None or context not in self._orders or key not in self._orders[context][0]:
                self._orders[context] = [list(entries), 0]
        else:
            self._orders.pop(context, None)

    def orders(self) -> dict[bytes, list[Any]]:
        """The ascending form's ``[keys, head]`` per context (class docstring), for direct
        writes (module docstring): a put of a new key above the greatest live key appends it
        to ``keys`` too (:func:`live_tail` gives the greatest live key), and a delete that leaves
        entries calls :func:`compact` afterwards."""
        return self._orders

    def _to_sorted(self, context: bytes) -> Any:
        """Turn ``context`` into the sorted form; its SortedDict. O(n log n), once."""
        entries = SortedDict(self._maps[context])
        self._maps[context] = entries
        del self._orders[context]
        return entries

    def last(self, context: bytes) -> tuple[UserKey, Value] | None:
        """The greatest entry: O(1) amortised."""
        entries = self._maps.get(context)
        if not entries:
            return None
        order = self._orders.get(context)
        if order is None:
            key, value = entries.peekitem(-1)
            return key, _detached(value)
        key = live_tail(entries, order[0])
        return key, _detached(entries[key])

    def first(self, context: bytes) -> tuple[UserKey, Value] | None:
        """The smallest entry: O(1) amortised."""
        entries = self._maps.get(context)
        if not entries:
            return None
        order = self._orders.get(context)
        if order is None:
            key, value = entries.peekitem(0)
            return key, _detached(value)
        keys, head = order
        while keys[head] not in entries:
            head += 1
        if head > 32 and 2 * head > len(keys):  # drop the deleted prefix: amortised O(1)
            del keys[:head]
            head = 0
        order[1] = head
        key = keys[head]
        return key, _detached(entries[key])

    def before(self, context: bytes, key: UserKey) -> tuple[UserKey, Value] | None:
        """The greatest entry strictly below ``key``: O(log n) (the context turns sorted)."""
        entries = self._sorted(context)
        if not entries:
            return None
        index = entries.bisect_left(key)
        if index == 0:
            return None
        found, value = entries.peekitem(index - 1)
        return found, _detached(value)

    def ceiling(self, context: bytes, key: UserKey) -> tuple[UserKey, Value] | None:
        """The smallest entry at or above ``key``: O(log n) (the context turns sorted)."""
        entries = self._sorted(context)
        if not entries:
            return None
        index = entries.bisect_left(key)
        if index == len(entries):
            return None
        found, value = entries.peekitem(index)
        return found, _detached(value)

    def _sorted(self, context: bytes) -> Any:
        """The SortedDict of ``context`` (turning it sorted first), or None if it is empty."""
        entries = self._maps.get(context)
        if entries is not None and context in self._orders:
            entries = self._to_sorted(context)
        return entries

    def _check(self) -> None:
        """The forms' invariants (tests): an ascending context's dict iterates in ascending
        key order and its ``keys[head:]`` hold every live key in ascending order; every
        other context is a SortedDict. O(entries)."""
        for context, entries in self._maps.items():
            assert entries, f"an empty context {context!r} is stored"
            order = self._orders.get(context)
            if order is None:
                assert isinstance(entries, SortedDict), f"context {context!r} has neither form"
                continue
            assert type(entries) is dict
            live = list(entries)
            assert live == sorted(live), f"context {context!r}: insertion order is not ascending"
            keys, head = order
            assert keys == sorted(set(keys)), f"context {context!r}: keys not strictly ascending"
            assert [key for key in keys[head:] if key in entries] == live, (
                f"context {context!r}: keys miss a live key"
            )
        assert set(self._orders) <= set(self._maps), "an order without entries"


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapBackend:
    """Named heap states of one operator instance, with an undo journal (module docstring)."""

    name = "heap"
    supports_ordered = True

    def __init__(self) -> None:
        self._journal: Journal = []
        # Journal records below this index are committed: never replayed (:meth:`end_unit`).
        self._committed = 0
        self._states = NamedStates(lambda kind, _name: kind(self._journal))

    def value_state(self, name: str) -> HeapValueState:
        """The value state ``name`` (the same object on every call)."""
        return self._states.get(name, HeapValueState)

    def map_state(self, name: str) -> HeapMapState:
        """The map state ``name``."""
        return self._states.get(name, HeapMapState)

    def sorted_map_state(self, name: str) -> HeapSortedMapState:
        """The sorted map state ``name``."""
        return self._states.get(name, HeapSortedMapState)

    @property
    def journal(self) -> Journal:
        """The undo journal, for direct writes (module docstring)."""
        return self._journal

    def commit(self) -> None:
        """Forget the undo records: the writes since the last commit stay. O(1) amortised."""
        self._journal.clear()
        self._committed = 0

    def end_unit(self) -> None:
        """:meth:`commit` for the per-input loops: after a unit that journaled at most one record,
        the records stay in the journal below the committed mark (never replayed) so that the
        list keeps its buffer, up to :data:`KEPT_RECORDS` of them; otherwise the journal is
        cleared (module docstring, *The journal*). O(1) amortised."""
        journal = self._journal
        size = len(journal)
        if size > KEPT_RECORDS or size > self._committed + 1:
            journal.clear()
            self._committed = 0
        else:
            self._committed = size

    def checkpoint(self) -> None:
        """:meth:`commit` (heap state is not durable: every write so far stays, unjournaled)."""
        self.commit()

    def rollback(self) -> None:
        """Undo every write since the last commit, newest first. O(writes undone)."""
        journal = self._journal
        committed = self._committed
        while len(journal) > committed:
            owner, context, key, previous = journal.pop()
            owner.undo(context, key, previous)

    def close(self) -> None:
        """Nothing to release."""
