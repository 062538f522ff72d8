"""MAP: the linked multiset — O(1) state accesses per event, whatever the history length.

Layout, per context key (``C``), in three states::

    meta   (ValueState)  C -> [size, head, tail]
                         size: number of stored rows; head/tail: first/last node's seq.
                         The tail is also the highest sequence number in use: the next
                         append gets tail + 1.
    index  (MapState)    (C, match key) -> [first, last]
                         seqs of the first and last stored row with that match key
    nodes  (MapState)    (C, encode_seq(seq)) -> [row, prev, next, same, stamp]
                         prev/next: neighbours in insertion order, 0 = the adjacent seq
                         (seq - 1 / seq + 1; the head's prev and the tail's next are unused);
                         same: the next node with the same match key (0 = none);
                         stamp: the element's timestamp

    meta = [4, 1, 7]      head 1                                    tail 7
    nodes:  1: [a, 0, 0, 3, t] -> 2: [b, 0, 3+, 0, t] -> 3: [a, 0, 0, 0, t] -> 7: [c, 6+, 0, 0, t]
    index:  a -> [1, 3]   b -> [2, 2]   c -> [7, 7]          (+ an explicit link: 4-6 are gone)

Seqs increase along the list (an append takes tail + 1), so a link only has to be written
when a removal leaves a gap: an append writes no neighbour at all, removing the head writes
no neighbour (the new head's prev is never read), removing the tail rewrites the new tail
only if its next was explicit, and only a middle removal rewrites both neighbours. Seqs above
the tail are reused after the tail is removed; safe, because no live link or index entry
points above the tail.

The same-chain of a match key lists its nodes in insertion order (ascending seq): appends go
to its end, and only its first node is ever removed (rule 6) or replaced in place (rule 4,
which changes the node's row and stamp but neither its seq nor any link). That is what keeps
the chain right when one upsert key is appended, replaced in place and retracted between
other keys (the production bug of docs/spec.md section 5 and rule 4).

An empty key has no meta, no index entries and no nodes. State accesses per event, reads +
writes (docs/strategies.md has the table): append 2 + 3 (a duplicate: +1 + 1), replace in
place 3 + 1, retract of the head 3 + 3, of the tail 4 + 3 or 4, of a middle node 5 + 5,
miss 1 or 2.

TTL: a timer per stamp removes its node when it fires (the bounded sweep, docs/ttl.md). While
the sweep lags, an input first removes the expired leading nodes of its match key's chain and
the expired tail nodes (:meth:`LinkedList.trim`), and a retraction of the tail walks back over
expired nodes to the last visible row (:meth:`LinkedList.remove_visible`): +1 read per chain
head or tail that is looked at and found live, and each expired node met is removed once
(amortised: its timer then finds it gone). Expired middle nodes wait for their timers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Final

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state import MapState, StateBackend, ValueState
from .common import (
    DELETE,
    INSERT,
    UPDATE_AFTER,
    StrategyBase,
    check_chains,
    decode_seq,
    emit,
    encode_seq,
    missing,
    require,
    same_chains,
)

Meta = list[int]  # [size, head, tail]
Node = list[Any]  # [row, prev, next, same, stamp]
Entry = list[int]  # [first, last]

# Node fields (``Final`` literals: the compiled build inlines them; a plain module global
# would be a dict lookup per use there).
ROW: Final = 0
PREV: Final = 1
NEXT: Final = 2
SAME: Final = 3
STAMP: Final = 4
# Meta fields.
SIZE: Final = 0
HEAD: Final = 1
TAIL: Final = 2


@mypyc_attr(allow_interpreted_subclasses=True)
class LinkedList:
    """The linked multiset of every context key, over an ``index`` and a ``nodes`` map state.

    The caller owns the per-key meta (reads it once and writes it once per event): methods
    take the meta as read and return the meta to write. :meth:`find`, :meth:`replace`,
    :meth:`append` and :meth:`remove` are O(1) state accesses; :meth:`walk`, :meth:`build` and
    :meth:`drop` are O(n) (switching layouts, exporting histories).
    """

    def __init__(self, index: MapState, nodes: MapState) -> None:
        self._index = index
        self._nodes = nodes

    def _key(self, seq: int) -> Any:
        """The ``nodes`` state's key of node ``seq``: ``encode_seq(seq)`` (8 bytes whose byte
        order is the numeric order). A subclass may keep another key with the same order
        (:class:`~.linked_map_heap.HeapLinkedList`: the int itself)."""
        return encode_seq(seq)

    def _seq(self, key: Any) -> int:
        """The seq of a ``nodes`` key (the inverse of :meth:`_key`)."""
        return decode_seq(key)

    def _node(self, context: bytes, key: Any) -> Node:
        """The node stored under ``key``; CorruptStateError if it is missing. One read."""
        node: Node | None = self._nodes.get(context, key)
        if node is None:
            raise missing("nodes", context, self._seq(key))
        return node

    def find(self, context: bytes, match: MatchKey) -> Entry | None:
        """The ``[first, last]`` seqs of the rows matching ``match``, or None. One read."""
        entry: Entry | None = self._index.get(context, match)
        return entry

    def node(self, context: bytes, seq: int) -> Node | None:
        """The node ``seq`` of ``context``, or None. One read."""
        node: Node | None = self._nodes.get(context, self._key(seq))
        return node

    def replace(self, context: bytes, entry: Entry, row: StoredRow, stamp: int, restamp: bool = True) -> None:
        """Rule 4: the first match takes ``row`` (and ``stamp`` if ``restamp``) in place.

        1 read, 1 write.
        """
        key = self._key(entry[0])
        node = self._node(context, key)
        node[ROW] = row
        if restamp:
            node[STAMP] = stamp
        self._nodes.put(context, key, node)

    def append(
        self,
        context: bytes,
        meta: Meta | None,
        entry: Entry | None,
        match: MatchKey,
        row: StoredRow,
        stamp: int,
    ) -> Meta:
        """Rule 3 (and 4 without a match): a new tail node; returns the new meta.

        ``entry`` is :meth:`find`'s answer for ``match``. 2 writes; a duplicate (``entry`` not
        None) also rewrites the last node of its chain (1 read, 1 write).
        """
        if meta is None:  # the key is empty: no index entry can exist
            self._nodes.put(context, self._key(1), [row, 0, 0, 0, stamp])
            self._index.put(context, match, [1, 1])
            return [1, 1, 1]
        size, head, tail = meta
        seq = tail + 1  # the old tail's implicit next
        if entry is None:
            entry = [seq, seq]
        else:  # a duplicate: extend the match key's chain
            last_key = self._key(entry[1])
            last_node = self._node(context, last_key)
            last_node[SAME] = seq
            self._nodes.put(context, last_key, last_node)
            entry[1] = seq
        self._nodes.put(context, self._key(seq), [row, 0, 0, 0, stamp])
        self._index.put(context, match, entry)
        return [size + 1, head, seq]

    def add(
        self,
        context: bytes,
        meta: Meta,
        match: MatchKey,
        row: StoredRow,
        stamp: int,
        owner: StrategyBase,
    ) -> Meta | None:
        """Rules 3-4 on a non-empty key (MAP, and ADAPTIVE in MAP mode): returns the meta to
        write, or None when it is unchanged (a rule-4 replacement in place).

        ``owner`` supplies the upsert-key setting, the re-stamp policy and the timers
        (:meth:`StrategyBase._stamped`). 1 read (find) + :meth:`replace` or :meth:`append`.
        """
        entry = self.find(context, match)
        if entry is not None and owner._upsert:
            restamp = owner._restamp_replaced
            self.replace(context, entry, row, stamp, restamp)
            if restamp:
                owner._stamped(context, entry[0], stamp)
            return None
        meta = self.append(context, meta, entry, match, row, stamp)
        owner._stamped(context, meta[TAIL], stamp)
        return meta

    def remove(
        self,
        context: bytes,
        meta: Meta,
        entry: Entry,
        match: MatchKey,
        seq: int = 0,
        restamp: int | None = None,
    ) -> tuple[Meta | None, StoredRow | None]:
        """Unlink node ``seq`` (default: the first of ``entry``, rule 6) of the chain of ``match``.

        Returns ``(meta, rollback)``: ``meta`` None means the key is now empty (rule 8);
        ``rollback`` is the new tail's row when the removed node was the tail (rule 9), and
        the new tail takes the stamp ``restamp`` unless that is None. Removing the first of
        its chain (every rule-6 removal) is O(1) accesses; a later node (only TTL expiry does
        that) first walks its chain to find the chain predecessor: O(chain length).
        """
        nodes, index = self._nodes, self._index
        first = seq or entry[0]
        key = self._key(first)
        node = self._node(context, key)
        nodes.delete(context, key)
        size, head, tail = meta
        if size == 1:
            index.delete(context, match)
            return None, None
        same = node[SAME]
        if first != entry[0]:  # not the chain's first: relink its chain predecessor
            before = entry[0]
            before_node = self._node(context, self._key(before))
            while before_node[SAME] != first:
                before = before_node[SAME]
                before_node = self._node(context, self._key(before))
            before_node[SAME] = same
            nodes.put(context, self._key(before), before_node)
            if first == entry[1]:
                entry[1] = before
                index.put(context, match, entry)
        elif same:
            entry[0] = same
            index.put(context, match, entry)
        else:
            index.delete(context, match)
        if first == head:  # the successor becomes the head; its prev is never read again
            return [size - 1, node[NEXT] or first + 1, tail], None
        prev = node[PREV] or first - 1
        prev_key = self._key(prev)
        prev_node = self._node(context, prev_key)
        if first == tail:  # rule 9: the predecessor is the new tail, its next implicit
            if prev_node[NEXT] or restamp is not None:
                prev_node[NEXT] = 0
                if restamp is not None:
                    prev_node[STAMP] = restamp
                nodes.put(context, prev_key, prev_node)
            return [size - 1, head, prev], tuple(prev_node[ROW])
        after = node[NEXT] or first + 1
        prev_node[NEXT] = after
        nodes.put(context, prev_key, prev_node)
        after_key = self._key(after)
        after_node = self._node(context, after_key)
        after_node[PREV] = prev
        nodes.put(context, after_key, after_node)
        return [size - 1, head, tail], None

    def trim(self, context: bytes, meta: Meta, match: MatchKey, owner: StrategyBase) -> Meta | None:
        """Remove the expired nodes an input on ``match`` would otherwise read, while the
        expiry sweep lags (docs/ttl.md): first the expired leading nodes of ``match``'s chain
        (so its first node is the first *visible* match), then the expired tail nodes (so the
        tail is the last visible row, and None means the key is visibly empty). Returns the
        meta to write (the same object if nothing was removed). Each removed node is removed
        once, as its timer would have removed it, so this is amortised; a live node costs 1
        read (see :meth:`trim_tail` for a tail behind its chain's first node).
        """
        trimmed = self._trim_chain(context, meta, match, owner)
        return None if trimmed is None else self.trim_tail(context, trimmed, owner)

    def _trim_chain(self, context: bytes, meta: Meta, match: MatchKey, owner: StrategyBase) -> Meta | None:
        """Remove the expired leading nodes of ``match``'s chain: O(1) accesses each."""
        expired = owner._expired
        entry = self.find(context, match)
        while entry is not None and expired(self._node(context, self._key(entry[0]))[STAMP]):
            trimmed, _ = self.remove(context, meta, entry, match)
            owner._note_expired(context)
            if trimmed is None:
                return None
            meta = trimmed
            entry = self.find(context, match)
        return meta

    def trim_tail(self, context: bytes, meta: Meta, owner: StrategyBase) -> Meta | None:
        """Remove expired tail nodes until the tail is visible; None if none is left.

        An expired tail behind the first node of its chain (duplicates without upsert key)
        has its chain's expired leading nodes removed first, O(1) each (in processing time a
        chain's stamps ascend, so that removes the tail too); only a tail whose chain starts
        with a visible node is unlinked from the middle of its chain, O(chain length), once.
        """
        while True:
            tail = meta[TAIL]
            node = self._node(context, self._key(tail))
            if not owner._expired(node[STAMP]):
                return meta
            match = owner._match_key(tuple(node[ROW]))
            entry = self.find(context, match)
            if entry is None:
                raise missing("index", context, tail)
            if entry[0] != tail and owner._expired(self._node(context, self._key(entry[0]))[STAMP]):
                trimmed = self._trim_chain(context, meta, match, owner)
            else:
                trimmed, _ = self.remove(context, meta, entry, match, tail)
                owner._note_expired(context)
            if trimmed is None:
                return None
            meta = trimmed

    def remove_visible(
        self,
        context: bytes,
        meta: Meta,
        entry: Entry,
        match: MatchKey,
        restamp: int | None,
        owner: StrategyBase,
    ) -> tuple[Meta | None, StoredRow | None]:
        """:meth:`remove` of the first node of ``entry`` on a key :meth:`trim`-ed for ``match``
        while the sweep lags: when the tail was removed, the expired nodes before it are
        removed too, so rule 9 emits (and ``restamp`` stamps) the last *visible* row, and
        ``meta`` None means no visible row is left (rule 8)."""
        meta_after, rollback = self.remove(context, meta, entry, match)
        if meta_after is None or rollback is None:
            return meta_after, None
        meta_after = self.trim_tail(context, meta_after, owner)
        if meta_after is None:
            return None, None
        key = self._key(meta_after[TAIL])
        node = self._node(context, key)
        if restamp is not None:
            node[STAMP] = restamp
            self._nodes.put(context, key, node)
        return meta_after, tuple(node[ROW])

    def walk(self, context: bytes, meta: Meta) -> Iterator[Node]:
        """The nodes of ``context`` from head to tail. O(n) reads."""
        seq, tail = meta[HEAD], meta[TAIL]
        while True:
            node = self._node(context, self._key(seq))
            yield node
            if seq == tail:
                return
            seq = node[NEXT] or seq + 1

    def elements(self, context: bytes, meta: Meta) -> list[tuple[StoredRow, int]]:
        """(row, stamp) of every node from head to tail. O(n) reads."""
        return [(tuple(node[ROW]), node[STAMP]) for node in self.walk(context, meta)]

    def newest(self, context: bytes, meta: Meta, limit: int) -> tuple[list[tuple[StoredRow, int]], bool]:
        """(row, stamp) of the last ``limit`` nodes, oldest first, and whether older nodes
        exist: a walk back from the tail along prev links. At most ``limit`` reads."""
        seq, head = meta[TAIL], meta[HEAD]
        newest: list[tuple[StoredRow, int]] = []
        while len(newest) < limit:
            node = self._node(context, self._key(seq))
            newest.append((tuple(node[ROW]), node[STAMP]))
            if seq == head:
                newest.reverse()
                return newest, False
            seq = node[PREV] or seq - 1
        newest.reverse()
        return newest, True

    def check(self, context: bytes, meta: Meta, match_key: Callable[[StoredRow], MatchKey]) -> int:
        """Verify the layout of ``context`` (raise LayoutError); returns its size. O(n).

        The walk from head along next links ends at the tail after exactly ``size`` nodes with
        ascending seqs, every explicit prev link names the walk's predecessor, the tail is the
        highest seq, the nodes state holds no other node, and the index and same links are
        exactly the same-chains of the walk's match keys (:func:`check_chains`).
        """
        size, head, tail = meta
        require(size >= 1, context, f"meta size {size} of a stored key")
        seqs: list[int] = []
        matches: list[MatchKey] = []
        sames: list[int] = []
        seq, before = head, 0
        while True:
            found: Node | None = self._nodes.get(context, self._key(seq))
            require(found is not None, context, f"the walk reaches missing node {seq}")
            node: Node = found or []
            require(seq > before, context, f"seqs do not ascend along the list: {before} then {seq}")
            if before and node[PREV]:
                require(node[PREV] == before, context, f"node {seq}: prev {node[PREV]}, walked from {before}")
            elif before:
                require(before == seq - 1, context, f"node {seq}: implicit prev, walked from {before}")
            seqs.append(seq)
            matches.append(match_key(tuple(node[ROW])))
            sames.append(node[SAME])
            require(len(seqs) <= size, context, f"the walk passes meta size {size}")
            if seq == tail:
                break
            before, seq = seq, node[NEXT] or seq + 1
        require(len(seqs) == size, context, f"meta size {size}, walked {len(seqs)} nodes")
        stored = [self._seq(key) for key, _ in self._nodes.items(context)]
        require(sorted(stored) == seqs, context, f"nodes state holds {len(stored)} nodes, walked {size}")
        index = dict(self._index.items(context))
        check_chains(context, seqs, matches, sames, index)
        return size

    def build(
        self, context: bytes, rows: list[StoredRow], stamps: list[int], matches: list[MatchKey]
    ) -> Meta:
        """Store the non-empty history ``rows`` of an empty ``context``; return its meta.

        Nodes get seqs 1..n in order (every link implicit); O(n) writes.
        """
        same, entries = same_chains(matches)
        for position, row in enumerate(rows):
            self._nodes.put(context, self._key(position + 1), [row, 0, 0, same[position], stamps[position]])
        for match, entry in entries.items():
            self._index.put(context, match, entry)
        return [len(rows), 1, len(rows)]

    def drop(self, context: bytes) -> None:
        """Remove every node and index entry of ``context``."""
        self._nodes.clear(context)
        self._index.clear(context)


@mypyc_attr(allow_interpreted_subclasses=True)
class MapMaterializer(StrategyBase):
    """MAP on any backend: ``ValueState`` ``"meta"`` plus :class:`LinkedList` states."""

    strategy_name = "MAP"

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        super().__init__(keys, backend, settings)
        self._meta: ValueState = self._value_state("meta")
        # No meta is ever changed in place (LinkedList returns new ones), so heap state may hand
        # it out by reference (``stored``) instead of as a copy: the hot path's reads.
        self._meta_of: Callable[[bytes], Meta | None] = getattr(self._meta, "stored", self._meta.get)
        self._list = LinkedList(self._index_state("index"), backend.map_state("nodes"))

    def _trim(self, context: bytes, meta: Meta, match: MatchKey) -> Meta | None:
        """:meth:`LinkedList.trim` (the sweep lags), its meta written if it changed."""
        trimmed = self._list.trim(context, meta, match, self)
        if trimmed is None:
            self._meta.delete(context)
        elif trimmed is not meta:
            self._meta.put(context, trimmed)
        return trimmed

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        meta = self._meta_of(context)
        if self._lazy and meta is not None:
            meta = self._trim(context, meta, match)
        if meta is None:
            self._meta.put(context, self._list.append(context, None, None, match, row, stamp))
            self._stamped(context, 1, stamp)
            return self._added(INSERT, row)
        meta = self._list.add(context, meta, match, row, stamp, self)
        if meta is not None:
            self._meta.put(context, meta)
        return self._added(UPDATE_AFTER, row)

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        meta = self._meta_of(context)
        if self._lazy and meta is not None:
            meta = self._trim(context, meta, match)
        entry = None if meta is None else self._list.find(context, match)
        if meta is None or entry is None:
            self._miss(context, change)
            return None
        restamp = stamp if self._restamp_rollback else None
        if self._lazy:
            meta, rollback = self._list.remove_visible(context, meta, entry, match, restamp, self)
        else:
            meta, rollback = self._list.remove(context, meta, entry, match, restamp=restamp)
        if meta is None:
            self._meta.delete(context)
            return emit(DELETE, change.row)
        self._meta.put(context, meta)
        if rollback is None:
            return None
        if restamp is not None:
            self._stamped(context, meta[TAIL], stamp)
        return emit(UPDATE_AFTER, rollback)

    def _expire_element(self, context: bytes, seq: int) -> None:
        """Remove node ``seq`` if it exists and is expired (its timer may be stale). O(1)
        accesses, or O(chain) when it is not the first of its match key's chain."""
        node = self._list.node(context, seq)
        if node is None or not self._expired(node[STAMP]):
            return
        meta = self._meta.get(context)
        match = self._match_key(tuple(node[ROW]))
        entry = self._list.find(context, match)
        if meta is None or entry is None:
            raise missing("meta/index", context, seq)
        meta, _ = self._list.remove(context, meta, entry, match, seq)
        self._note_expired(context)
        if meta is None:
            self._meta.delete(context)
        else:
            self._meta.put(context, meta)

    def _contexts(self) -> list[bytes]:
        return list(self._meta.contexts())

    def _check(self) -> None:
        """Every stored key's linked list (:meth:`LinkedList.check`); no nodes or index
        entries of a key without meta."""
        contexts = set(self._meta.contexts())
        for context in contexts:
            meta: Meta | None = self._meta.get(context)
            require(meta is not None, context, "listed without a value")
            self._list.check(context, meta or [], self._match_key)
        for state in ("nodes", "index"):
            orphans = set(self.backend.map_state(state).contexts()) - contexts
            require(not orphans, min(orphans, default=b""), f"{state} entries without meta")

    def _elements(self, context: bytes) -> list[tuple[StoredRow, int]]:
        meta = self._meta.get(context)
        return [] if meta is None else self._list.elements(context, meta)

    def _newest_elements(self, context: bytes, limit: int) -> tuple[list[tuple[StoredRow, int]], bool]:
        """The last ``limit`` nodes (:meth:`LinkedList.newest`): 1 + at most ``limit`` reads."""
        meta = self._meta.get(context)
        return ([], False) if meta is None else self._list.newest(context, meta, limit)

    def _drop(self, context: bytes) -> None:
        self._list.drop(context)
        self._meta.delete(context)

    def _load(self, context: bytes, elements: list[tuple[StoredRow, int]]) -> None:
        rows = [row for row, _ in elements]
        stamps = [stamp for _, stamp in elements]
        matches = [self._match_key(row) for row in rows]
        self._meta.put(context, self._list.build(context, rows, stamps, matches))
        for seq, stamp in enumerate(stamps, start=1):
            self._stamped(context, seq, stamp)
