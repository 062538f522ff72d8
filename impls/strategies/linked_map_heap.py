"""MAP's linked list on heap, written straight into the heap dicts: the same layout, fewer calls.

The layout is :mod:`.linked_map`'s, entry for entry (``meta``, ``index``, ``nodes``), with
one difference that never leaves memory: a node's key is its seq as an int, not
``encode_seq(seq)`` (a heap dict needs no byte order, and ints order the same; formatting
and hashing 8 bytes per node access was a fifth of a heap event). :class:`HeapLinkedList` is
a :class:`~.linked_map.LinkedList` whose :meth:`~.linked_map.LinkedList._key` is the int, so
checks, exports, imports and ADAPTIVE's conversions run the general code on the same keys;
snapshots and savepoints carry elements, so nothing at rest changes. What differs is how an
event reaches it: :class:`HeapLinkedList` reads
and writes the heap states' dicts directly (:meth:`~..state.heap.HeapMapState.tables`) and
appends each write's undo record to the backend's journal itself, exactly as the states'
``put``/``delete`` would, so rollback is unchanged. One event is then one method call here
instead of the ~10 calls of :class:`~.linked_map.LinkedList` over the per-access state
interface (MAP on heap: ~31 Python calls per event before, ~16 after, counted with cProfile).

The rules are :class:`~.linked_map.LinkedList`'s ``add`` and ``remove`` of a chain's first
node (rules 3-10 without TTL): :class:`~.linked_map.LinkedList` stays the reference and the
general path. A node is rewritten as a new list, never changed in place (the journal keeps
the old one). Each write's undo record is appended before the write, so an interrupt between
two of them leaves nothing a rollback cannot revert. State accesses per event are those of
the docstring of :mod:`.linked_map`.

Used on a :class:`~..state.heap.HeapBackend` with TTL and async state off (with TTL, trimming
and timers take the general path) by MAP (:class:`HeapMapMaterializer`) and by ADAPTIVE in MAP
mode (:class:`~.adaptive_heap.HeapAdaptiveMaterializer`).
"""

from __future__ import annotations

from typing import Any

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state.heap import ABSENT, HeapBackend, HeapMapState, HeapValueState, Journal
from .common import DELETE, INSERT, UPDATE_AFTER, emit, missing
from .linked_map import NEXT, PREV, ROW, SAME, STAMP, Entry, LinkedList, MapMaterializer, Meta

Nodes = dict[Any, list[Any]]  # seq -> node, one context's


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapLinkedList(LinkedList):
    """MAP's linked list in a heap backend's ``index`` and ``nodes``, nodes keyed by their
    int seqs (:meth:`_key`), with rules 3-10 (TTL off) written into the dicts directly.

    The caller owns the meta (as :class:`~.linked_map.LinkedList`'s): it reads it, passes it
    in and writes the one returned. :meth:`insert_first`, :meth:`add_row` and :meth:`retract_first` are O(1)
    dict operations; everything else is :class:`~.linked_map.LinkedList`'s, on the same
    states and keys.
    """

    def __init__(self, backend: HeapBackend) -> None:
        self._index_state: HeapMapState = backend.map_state("index")
        self._nodes_state: HeapMapState = backend.map_state("nodes")
        super().__init__(self._index_state, self._nodes_state)
        self._indexes: dict[bytes, dict[Any, Any]] = self._index_state.tables()
        self._node_tables: dict[bytes, Nodes] = self._nodes_state.tables()
        self._journal: Journal = backend.journal

    def _key(self, seq: int) -> Any:
        """A node's key is its seq: heap dicts need no byte order (ints order the same)."""
        return seq

    def _seq(self, key: Any) -> int:
        seq: int = key
        return seq

    def insert_first(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Meta:
        """The first row of an empty key (no index entry or node can exist); its meta."""
        journal = self._journal
        journal.append((self._nodes_state, context, 1, ABSENT))
        self._node_tables[context] = {1: [row, 0, 0, 0, stamp]}
        journal.append((self._index_state, context, match, ABSENT))
        self._indexes[context] = {match: [1, 1]}
        return [1, 1, 1]

    def add_row(
        self,
        context: bytes,
        meta: Meta,
        match: MatchKey,
        row: StoredRow,
        stamp: int,
        upsert: bool,
        restamp: bool,
    ) -> Meta | None:
        """Rules 3-4 on a non-empty key: the meta to write, or None when it is unchanged (a
        rule-4 replacement in place of the first match, re-stamped if ``restamp``)."""
        journal = self._journal
        index = self._indexes[context]
        nodes = self._node_tables[context]
        entry: Entry | None = index.get(match)
        if entry is not None and upsert:
            first = entry[0]
            node = nodes.get(first)
            if node is None:
                raise missing("nodes", context, first)
            journal.append((self._nodes_state, context, first, node))
            nodes[first] = [row, node[PREV], node[NEXT], node[SAME], stamp if restamp else node[STAMP]]
            return None
        size = meta[0]
        seq = meta[2] + 1  # the old tail's implicit next
        if entry is None:
            chain = [seq, seq]
        else:  # a duplicate: extend the match key's chain
            last_seq = entry[1]
            last = nodes.get(last_seq)
            if last is None:
                raise missing("nodes", context, last_seq)
            journal.append((self._nodes_state, context, last_seq, last))
            nodes[last_seq] = [last[ROW], last[PREV], last[NEXT], seq, last[STAMP]]
            chain = [entry[0], seq]
        journal.append((self._nodes_state, context, seq, nodes.get(seq, ABSENT)))
        nodes[seq] = [row, 0, 0, 0, stamp]
        journal.append((self._index_state, context, match, ABSENT if entry is None else entry))
        index[match] = chain
        return [size + 1, meta[1], seq]

    def retract_first(
        self, context: bytes, meta: Meta, match: MatchKey, restamp: int | None
    ) -> tuple[bool, Meta | None, StoredRow | None]:
        """Rules 6-10 on a non-empty key: ``(found, meta, rollback)``. ``found`` False is rule 7
        (nothing changed). Else the first node of ``match``'s chain is unlinked; ``meta`` None
        means the key is now empty (rule 8; its index and nodes are gone, the caller deletes
        the meta); ``rollback`` is the new tail's row when the removed node was the tail
        (rule 9), and the new tail takes the stamp ``restamp`` unless that is None."""
        indexes = self._indexes
        index = indexes[context]
        entry: Entry | None = index.get(match)
        if entry is None:
            return False, meta, None
        journal, nodes_state = self._journal, self._nodes_state
        first = entry[0]
        nodes = self._node_tables[context]
        node = nodes.get(first)
        if node is None:
            raise missing("nodes", context, first)
        journal.append((nodes_state, context, first, node))
        del nodes[first]
        size = meta[0]
        head = meta[1]
        tail = meta[2]
        journal.append((self._index_state, context, match, entry))
        if size == 1:
            del index[match]
            if not index:
                del indexes[context]
            if not nodes:
                del self._node_tables[context]
            return True, None, None
        same: int = node[SAME]
        if same:
            index[match] = [same, entry[1]]
        else:
            del index[match]  # other nodes remain, so other index entries do
        if first == head:  # the successor becomes the head; its prev is never read again
            after: int = node[NEXT]
            return True, [size - 1, after or first + 1, tail], None
        before: int = node[PREV]
        prev = before or first - 1
        prev_node = nodes.get(prev)
        if prev_node is None:
            raise missing("nodes", context, prev)
        if first == tail:  # rule 9: the predecessor is the new tail, its next implicit
            if prev_node[NEXT] or restamp is not None:
                journal.append((nodes_state, context, prev, prev_node))
                stamp = prev_node[STAMP] if restamp is None else restamp
                nodes[prev] = [prev_node[ROW], prev_node[PREV], 0, prev_node[SAME], stamp]
            return True, [size - 1, head, prev], tuple(prev_node[ROW])
        following: int = node[NEXT]
        after = following or first + 1
        journal.append((nodes_state, context, prev, prev_node))
        nodes[prev] = [prev_node[ROW], prev_node[PREV], after, prev_node[SAME], prev_node[STAMP]]
        after_node = nodes.get(after)
        if after_node is None:
            raise missing("nodes", context, after)
        journal.append((nodes_state, context, after, after_node))
        nodes[after] = [after_node[ROW], prev, after_node[NEXT], after_node[SAME], after_node[STAMP]]
        return True, [size - 1, head, tail], None


@mypyc_attr(allow_interpreted_subclasses=True)
class HeapMapMaterializer(MapMaterializer):
    """MAP on heap with TTL and async state off: events through :class:`HeapLinkedList`
    (module docstring); everything else (checks, export, import, TTL-free lifecycle) is
    :class:`~.linked_map.MapMaterializer`'s on the same states, through the same list."""

    def __init__(self, keys: Keys, backend: HeapBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._use_match_tokens()
        self._heap_meta: HeapValueState = backend.value_state("meta")  # ``self._meta``, typed as heap's
        self._metas: dict[bytes, Any] = self._heap_meta.table()
        self._meta_journal: Journal = backend.journal
        self._heap_list = HeapLinkedList(backend)
        self._list = self._heap_list

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        """Rules 3-5: O(1) dict operations."""
        metas = self._metas
        meta = metas.get(context)
        if meta is None:
            self._meta_journal.append((self._heap_meta, context, None, ABSENT))
            metas[context] = self._heap_list.insert_first(context, match, row, stamp)
            return self._added(INSERT, row)
        added = self._heap_list.add_row(
            context, meta, match, row, stamp, self._upsert, self._restamp_replaced
        )
        if added is not None:
            self._meta_journal.append((self._heap_meta, context, None, meta))
            metas[context] = added
        return self._added(UPDATE_AFTER, row)

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        """Rules 6-10: O(1) dict operations."""
        metas = self._metas
        meta = metas.get(context)
        if meta is None:
            self._miss(context, change)
            return None
        restamp = stamp if self._restamp_rollback else None
        found, after, rollback = self._heap_list.retract_first(context, meta, match, restamp)
        if not found:
            self._miss(context, change)
            return None
        self._meta_journal.append((self._heap_meta, context, None, meta))
        if after is None:
            del metas[context]
            return emit(DELETE, change.row)
        metas[context] = after
        return None if rollback is None else emit(UPDATE_AFTER, rollback)
