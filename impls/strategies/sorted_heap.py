"""SORTED on heap, written straight into the heap dicts: the same layout, fewer calls.

The layout is :mod:`.sorted`'s (``nodes`` in a sorted map state, ``index``), so checks,
snapshots, savepoints and migration see no difference. A key whose nodes are in the heap
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

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..rows import StoredRow
from ..settings import Settings
from ..state.codec import decode_seq, encode_seq
from ..state.heap import ABSENT, HeapBackend, compact, live_tail
from .common import DELETE, INSERT, UPDATE_AFTER, emit, missing
from .sorted import ROW, SAME, STAMP, SortedMaterializer

_FIRST = encode_seq(1)


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapSortedMaterializer(SortedMaterializer):
    """SORTED on heap with TTL and async state off (module docstring)."""

    def __init__(self, keys: Keys, backend: HeapBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        # SortedMaterializer's ``_nodes`` and ``_index`` are these heap states (async state is
        # off): the journal records name them, the dicts below are theirs.
        nodes = backend.sorted_map_state("nodes")
        self._node_maps, self._orders = nodes.tables(), nodes.orders()
        self._index_maps = backend.map_state("index").tables()
        self._journal = backend.journal

    def _add(self, context: bytes, match: bytes, row: StoredRow, stamp: int) -> Change:
        """Rules 3-5: O(1) amortised."""
        journal = self._journal
        entries = self._node_maps.get(context)
        if entries is None:  # an empty key: no index entry can exist
            journal.append((self._nodes, context, _FIRST, ABSENT))
            self._node_maps[context] = {_FIRST: [row, 0, stamp]}
            self._orders[context] = [[_FIRST], 0]
            journal.append((self._index, context, match, ABSENT))
            self._index_maps[context] = {match: [1, 1]}
            return emit(INSERT, row)
        order = self._orders.get(context)
        if order is None:  # the sorted form
            return super()._add(context, match, row, stamp)
        index = self._index_maps[context]
        entry = index.get(match)
        if entry is not None and self._upsert:  # rule 4: the first match, in place
            key = encode_seq(entry[0])
            node = entries.get(key)
            if node is None:
                raise missing("nodes", context, entry[0])
            journal.append((self._nodes, context, key, node))
            entries[key] = [row, node[SAME], stamp if self._restamp_replaced else node[STAMP]]
            return emit(UPDATE_AFTER, row)
        keys = order[0]
        tail_key = live_tail(entries, keys)
        seq = decode_seq(tail_key) + 1
        if entry is None:
            chain = [seq, seq]
        else:  # a duplicate: extend the match key's chain
            last_key = tail_key if entry[1] == seq - 1 else encode_seq(entry[1])
            last = entries.get(last_key)
            if last is None:
                raise missing("nodes", context, entry[1])
            journal.append((self._nodes, context, last_key, last))
            entries[last_key] = [last[ROW], seq, last[STAMP]]
            chain = [entry[0], seq]
        key = encode_seq(seq)
        journal.append((self._nodes, context, key, ABSENT))  # above the tail: none there
        keys.append(key)
        entries[key] = [row, 0, stamp]
        journal.append((self._index, context, match, ABSENT if entry is None else entry))
        index[match] = chain
        return emit(UPDATE_AFTER, row)

    def _retract(self, context: bytes, match: bytes, change: Change, stamp: int) -> Change | None:
        """Rules 6-10: O(1) amortised."""
        order = self._orders.get(context)
        if order is None:  # an empty key (no index entry: a miss) or the sorted form
            return super()._retract(context, match, change, stamp)
        journal = self._journal
        index = self._index_maps[context]
        entry = index.get(match)
        if entry is None:
            self._miss(context, change)
            return None
        first, last = entry
        key = encode_seq(first)
        entries = self._node_maps[context]
        node = entries.get(key)
        if node is None:
            raise missing("nodes", context, first)
        journal.append((self._nodes, context, key, node))
        del entries[key]
        journal.append((self._index, context, match, entry))
        same = 0 if first == last else node[SAME]
        if same:
            index[match] = [same, last]
        else:
            del index[match]
        if not entries:  # rule 8: the key is empty (so is its index)
            del self._node_maps[context], self._orders[context]
            if not index:
                del self._index_maps[context]
            return emit(DELETE, change.row)
        tail_key = live_tail(entries, order[0])
        compact(entries, order)
        if tail_key > key:  # rule 10: not the tail
            return None
        tail = entries[tail_key]  # rule 9: the new tail is emitted
        if self._restamp_rollback:
            journal.append((self._nodes, context, tail_key, tail))
            entries[tail_key] = [tail[ROW], tail[SAME], stamp]
        return emit(UPDATE_AFTER, tuple(tail[ROW]))
