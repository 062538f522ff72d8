"""SORTED on heap, written straight into the heap dicts: the same layout, fewer calls.

The layout is :mod:`.sorted`'s (``nodes`` in a sorted map state, ``index``), with nodes keyed
by their int seqs instead of ``encode_seq(seq)`` (:meth:`HeapSortedMaterializer._key`: ints
order as those bytes do, and cost no formatting or hashing); checks, exports and imports run
the general code on the same keys, and snapshots, savepoints and migration carry elements,
so nothing at rest changes. A key whose nodes are in the heap
sorted map's *ascending* form (:class:`~..state.heap.HeapSortedMapState`: a dict in ascending
insertion order plus a lazily trimmed key list; every key SORTED builds stays so, as its
appends always take the tail's seq + 1) is changed here directly: the dicts are read and
written without the per-access state calls, and each write's undo record is appended to the
backend's journal first, exactly as the states' ``put``/``delete`` would, so rollback is
unchanged. A key in the sorted form (after a rollback or a bisection) takes
:class:`~.sorted.SortedMaterializer`'s general path, which stays the reference.

Per event: O(1) amortised dict and list operations (the key list's trimming and rebuilding
are :class:`~..state.heap.HeapSortedMapState`'s), the state accesses of :mod:`.sorted`.
Used on a :class:`~..state.heap.HeapBackend` with TTL and async state off.
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state.heap import (
    ABSENT,
    HeapBackend,
    HeapMapState,
    HeapSortedMapState,
    Journal,
    compact,
    live_tail,
)
from .common import DELETE, INSERT, UPDATE_AFTER, emit, missing
from .sorted import ROW, SAME, STAMP, SortedMaterializer


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapSortedMaterializer(SortedMaterializer):
    """SORTED on heap with TTL and async state off (module docstring)."""

    def __init__(self, keys: Keys, backend: HeapBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._use_match_tokens()
        # SortedMaterializer's ``_nodes`` and ``_index`` are these heap states (async state is
        # off): the journal records name them, the dicts below are theirs.
        nodes = backend.sorted_map_state("nodes")
        self._heap_nodes: HeapSortedMapState = nodes  # the owners of the undo records
        self._heap_index: HeapMapState = backend.map_state("index")
        self._node_maps: dict[bytes, Any] = nodes.tables()
        self._orders: dict[bytes, list[Any]] = nodes.orders()
        self._index_maps: dict[bytes, dict[Any, Any]] = backend.map_state("index").tables()
        self._journal: Journal = backend.journal

    def _key(self, seq: int) -> Any:
        """A node's key is its seq: heap dicts need no byte order (ints order the same)."""
        return seq

    def _seq(self, key: Any) -> int:
        seq: int = key
        return seq

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        """Rules 3-5: O(1) amortised."""
        journal = self._journal
        entries: dict[Any, list[Any]] | None = self._node_maps.get(context)
        if entries is None:  # an empty key: no index entry can exist
            journal.append((self._heap_nodes, context, 1, ABSENT))
            self._node_maps[context] = {1: [row, 0, stamp]}
            self._orders[context] = [[1], 0]
            journal.append((self._heap_index, context, match, ABSENT))
            self._index_maps[context] = {match: [1, 1]}
            return self._added(INSERT, row)
        order: list[Any] | None = self._orders.get(context)
        if order is None:  # the sorted form
            return super()._add(context, match, row, stamp)
        index = self._index_maps[context]
        entry: list[int] | None = index.get(match)
        if entry is not None and self._upsert:  # rule 4: the first match, in place
            first = entry[0]
            node = entries.get(first)
            if node is None:
                raise missing("nodes", context, first)
            journal.append((self._heap_nodes, context, first, node))
            entries[first] = [row, node[SAME], stamp if self._restamp_replaced else node[STAMP]]
            return self._added(UPDATE_AFTER, row)
        keys: list[Any] = order[0]
        tail: int = live_tail(entries, keys)
        seq = tail + 1
        if entry is None:
            chain = [seq, seq]
        else:  # a duplicate: extend the match key's chain
            last_seq = entry[1]
            last = entries.get(last_seq)
            if last is None:
                raise missing("nodes", context, last_seq)
            journal.append((self._heap_nodes, context, last_seq, last))
            entries[last_seq] = [last[ROW], seq, last[STAMP]]
            chain = [entry[0], seq]
        journal.append((self._heap_nodes, context, seq, ABSENT))  # above the tail: none there
        keys.append(seq)
        entries[seq] = [row, 0, stamp]
        journal.append((self._heap_index, context, match, ABSENT if entry is None else entry))
        index[match] = chain
        return self._added(UPDATE_AFTER, row)

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        """Rules 6-10: O(1) amortised."""
        order: list[Any] | None = self._orders.get(context)
        if order is None:  # an empty key (no index entry: a miss) or the sorted form
            return super()._retract(context, match, change, stamp)
        journal = self._journal
        index = self._index_maps[context]
        entry: list[int] | None = index.get(match)
        if entry is None:
            self._miss(context, change)
            return None
        first = entry[0]
        last = entry[1]
        entries: dict[Any, list[Any]] = self._node_maps[context]
        node = entries.get(first)
        if node is None:
            raise missing("nodes", context, first)
        journal.append((self._heap_nodes, context, first, node))
        del entries[first]
        journal.append((self._heap_index, context, match, entry))
        same: int = 0 if first == last else node[SAME]
        if same:
            index[match] = [same, last]
        else:
            del index[match]
        if not entries:  # rule 8: the key is empty (so is its index)
            del self._node_maps[context], self._orders[context]
            if not index:
                del self._index_maps[context]
            return emit(DELETE, change.row)
        tail: int = live_tail(entries, order[0])
        compact(entries, order)
        if tail > first:  # rule 10: not the tail
            return None
        tail_node = entries[tail]  # rule 9: the new tail is emitted
        if self._restamp_rollback:
            journal.append((self._heap_nodes, context, tail, tail_node))
            entries[tail] = [tail_node[ROW], tail_node[SAME], stamp]
        return emit(UPDATE_AFTER, tuple(tail_node[ROW]))
