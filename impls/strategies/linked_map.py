"""MAP: the linked multiset — O(1) state accesses per event, whatever the history length.

Layout, per context key (``C``), in three states::

    meta   (ValueState)  C -> [high, size, head, tail]
                         high: the highest sequence number handed out (the next is high + 1)
                         size: number of stored rows; head/tail: first/last node's seq
    index  (MapState)    (C, match key) -> [first, last]
                         the seqs of the first and last stored row with that match key
    nodes  (MapState)    (C, encode_seq(seq)) -> [row, prev, next, same, stamp]
                         prev/next: neighbours in insertion order (0 = none);
                         same: the next node with the same match key (0 = none);
                         stamp: the element's timestamp

    head                                                         tail
     |                                                            |
    [1: a, prev 0, next 2, same 3] <-> [2: b, ..., same 0] <-> [3: a, ..., next 0, same 0]
     ^                                                            ^
     index[a] = [1, 3] ---------------------------------------- same-chain 1 -> 3

Sequence numbers grow per key; a node keeps its seq (its position) for life. The same-chain
of a match key lists its nodes in insertion order (ascending seq), because appends go to its
end and only its first node is ever removed (rule 6) or replaced in place (rule 4, which
changes the node's row and stamp but neither its seq nor any link). That is what keeps the
chain right when one upsert key is appended, replaced in place and retracted between other
keys (the production bug of DESIGN section 9).

An empty key has no meta, no index entries and no nodes. Accesses per event (reads + writes):
append 3 + 4 (first row of a key: 1 + 3), append of a duplicate whose chain does not end at
the tail +2, replace in place 3 + 1, retract 4 + 4 at most, miss 2 — see docs/strategies.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...spec import Change, Keys, Row, RowKind
from ..settings import Settings
from ..state import MapState, StateBackend, ValueState, open_backend
from .common import StrategyBase, check_settings, decode_seq, encode_seq, missing, same_chains

Meta = list[int]  # [high, size, head, tail]
Node = list[Any]  # [row, prev, next, same, stamp]

# Node fields.
ROW, PREV, NEXT, SAME, STAMP = range(5)


class LinkedList:
    """The linked multiset of every context key, over an ``index`` and a ``nodes`` map state.

    The caller owns the per-key meta (reads it once and writes it once per event): methods
    take the meta as read and return the meta to write. Every method is O(1) state accesses
    except :meth:`walk`, :meth:`build` and :meth:`drop`, which are O(n) (switching layouts,
    exporting histories).
    """

    def __init__(self, index: MapState, nodes: MapState, upsert: bool) -> None:
        self._index = index
        self._nodes = nodes
        self._upsert = upsert

    def _node(self, context: bytes, key: bytes) -> Node:
        """The node stored under ``key``; CorruptStateError if it is missing. One read."""
        node: Node | None = self._nodes.get(context, key)
        if node is None:
            raise missing("nodes", context, decode_seq(key))
        return node

    def add(self, context: bytes, meta: Meta | None, match: bytes, row: Row, stamp: int) -> Meta | None:
        """Rules 3-4: replace the first match in place (upsert key) or append.

        Returns the new meta after an append, None after a replacement (meta unchanged).
        """
        nodes = self._nodes
        if meta is None:  # the key is empty: no index entry can exist
            nodes.put(context, encode_seq(1), [row, 0, 0, 0, stamp])
            self._index.put(context, match, [1, 1])
            return [1, 1, 1, 1]
        entry = self._index.get(context, match)
        if entry is not None and self._upsert:  # rule 4: the first match, in place
            key = encode_seq(entry[0])
            node = self._node(context, key)
            node[ROW] = row
            node[STAMP] = stamp
            nodes.put(context, key, node)
            return None
        high, size, head, tail = meta
        seq = high + 1
        tail_key = encode_seq(tail)
        tail_node = self._node(context, tail_key)
        tail_node[NEXT] = seq
        if entry is None:
            entry = [seq, seq]
        else:  # a duplicate: extend the match key's chain
            last = entry[1]
            if last == tail:
                tail_node[SAME] = seq
            else:
                last_key = encode_seq(last)
                last_node = self._node(context, last_key)
                last_node[SAME] = seq
                nodes.put(context, last_key, last_node)
            entry[1] = seq
        nodes.put(context, tail_key, tail_node)
        nodes.put(context, encode_seq(seq), [row, tail, 0, 0, stamp])
        self._index.put(context, match, entry)
        return [seq, size + 1, head, seq]

    def retract(
        self, context: bytes, meta: Meta | None, match: bytes
    ) -> tuple[bool, Meta | None, Row | None]:
        """Rule 6: unlink the first node matching ``match``.

        Returns ``(found, meta, rollback)``: ``found`` False is rule 7 (nothing changed);
        ``meta`` None means the key is now empty (rule 8); ``rollback`` is the new tail's row
        when the removed node was the tail and rows remain (rule 9).
        """
        if meta is None:
            return False, None, None
        index = self._index
        entry = index.get(context, match)
        if entry is None:
            return False, meta, None
        nodes = self._nodes
        key = encode_seq(entry[0])
        node = self._node(context, key)
        nodes.delete(context, key)
        high, size, head, tail = meta
        if size == 1:
            index.delete(context, match)
            return True, None, None
        prev, after, same = node[PREV], node[NEXT], node[SAME]
        if same:
            entry[0] = same
            index.put(context, match, entry)
        else:
            index.delete(context, match)
        rollback: Row | None = None
        if after:
            after_key = encode_seq(after)
            after_node = self._node(context, after_key)
            after_node[PREV] = prev
            nodes.put(context, after_key, after_node)
        else:
            tail = prev
        if prev:
            prev_key = encode_seq(prev)
            prev_node = self._node(context, prev_key)
            prev_node[NEXT] = after
            nodes.put(context, prev_key, prev_node)
            if not after:
                rollback = tuple(prev_node[ROW])
        else:
            head = after
        return True, [high, size - 1, head, tail], rollback

    def walk(self, context: bytes, meta: Meta) -> Iterator[Node]:
        """The nodes of ``context`` from head to tail. O(n) reads."""
        seq = meta[2]
        while seq:
            node = self._node(context, encode_seq(seq))
            yield node
            seq = node[NEXT]

    def elements(self, context: bytes, meta: Meta) -> list[tuple[Row, int]]:
        """(row, stamp) of every node from head to tail. O(n) reads."""
        return [(tuple(node[ROW]), node[STAMP]) for node in self.walk(context, meta)]

    def build(self, context: bytes, rows: list[Row], stamps: list[int], matches: list[bytes]) -> Meta:
        """Store the non-empty history ``rows`` of an empty ``context``; return its meta.

        Nodes get seqs 1..n in order; O(n) writes.
        """
        count = len(rows)
        same, entries = same_chains(matches)
        nodes = self._nodes
        for position in range(count):
            seq = position + 1
            after = seq + 1 if seq < count else 0
            node = [rows[position], position, after, same[position], stamps[position]]
            nodes.put(context, encode_seq(seq), node)
        for match, entry in entries.items():
            self._index.put(context, match, entry)
        return [count, count, 1, count]

    def drop(self, context: bytes) -> None:
        """Remove every node and index entry of ``context``."""
        self._nodes.clear(context)
        self._index.clear(context)


class MapMaterializer(StrategyBase):
    """MAP on any backend: ``ValueState`` ``"meta"`` plus :class:`LinkedList` states."""

    strategy_name = "MAP"

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._meta: ValueState = backend.value_state("meta")
        self._list = LinkedList(backend.map_state("index"), backend.map_state("nodes"), self._upsert)

    def _add(self, context: bytes, match: bytes, row: Row, stamp: int) -> Change:
        meta = self._meta.get(context)
        new_meta = self._list.add(context, meta, match, row, stamp)
        if new_meta is not None:
            self._meta.put(context, new_meta)
        return Change(RowKind.INSERT if meta is None else RowKind.UPDATE_AFTER, row)

    def _retract(self, context: bytes, match: bytes, change: Change) -> Change | None:
        found, meta, rollback = self._list.retract(context, self._meta.get(context), match)
        if not found:
            self._miss(context, change)
            return None
        if meta is None:
            self._meta.delete(context)
            return Change(RowKind.DELETE, change.row)
        self._meta.put(context, meta)
        return None if rollback is None else Change(RowKind.UPDATE_AFTER, rollback)

    def _contexts(self) -> list[bytes]:
        return list(self._meta.contexts())

    def _elements(self, context: bytes) -> list[tuple[Row, int]]:
        meta = self._meta.get(context)
        return [] if meta is None else self._list.elements(context, meta)

    def _drop(self, context: bytes) -> None:
        self._list.drop(context)
        self._meta.delete(context)

    def _load(self, context: bytes, rows: list[Row]) -> None:
        matches = [self._match_key(row) for row in rows]
        meta = self._list.build(context, rows, [self._now] * len(rows), matches)
        self._meta.put(context, meta)


def create(keys: Keys, settings: Settings) -> MapMaterializer:
    """MAP on ``settings.backend`` (registry factory)."""
    check_settings(settings, "MAP")
    return MapMaterializer(keys, open_backend(settings), settings)
