"""SORTED: nodes kept in the backend's key order instead of linked — no prev/next links.

Layout, per context key (``C``), in two states::

    nodes  (SortedMapState)  (C, encode_seq(seq)) -> [row, same, stamp]
                             iterates in ascending seq order = insertion order;
                             same: the next node with the same match key (0 = none)
    index  (MapState)        (C, match key) -> [first, last]   seqs of that key's same-chain

    nodes of C:  seq 1: a | seq 2: b | seq 5: a | seq 7: c   <- last(): the tail (reverse seek)
    index[a] = [1, 5]  (same-chain 1 -> 5), index[b] = [2, 2], index[c] = [7, 7]

There is no per-key meta: the tail, the next seq (tail + 1) and emptiness all come from one
reverse seek (``last``). After a retraction, ``last`` tells whether the removed node was the
tail (the new tail is below it: rule 9) or the key is empty (rule 8). Seqs above the tail
may be reused after the tail is removed; that is safe because a removed node is always the
first of its same-chain and leaves the index with it.

Accesses per event: append 2 reads (one a seek) + 2 writes (+2 for a duplicate whose chain
does not end at the tail), replace in place 2 + 1, retract at most 3 reads (one a seek) +
2 writes, miss 1. Runs only on backends with ordered iteration (``supports_ordered``).

TTL: as MAP (docs/ttl.md): timers remove nodes within the per-call budget; while the sweep
lags an input removes the expired leading nodes of its chain and the expired tail nodes
(:meth:`SortedMaterializer._trim`), and rule 9 seeks back over expired tails
(:meth:`SortedMaterializer._trim_tail`): amortised, each expired node met is removed once.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any, Final

from mypy_extensions import mypyc_attr

from ...spec import Change, Keys
from ..config import UnsupportedSetting
from ..rows import MatchKey, StoredRow
from ..settings import Settings
from ..state import StateBackend
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

Node = list[Any]  # [row, same, stamp]

# Node fields (``Final`` literals: inlined by the compiled build).
ROW: Final = 0
SAME: Final = 1
STAMP: Final = 2


@mypyc_attr(allow_interpreted_subclasses=True)
class SortedMaterializer(StrategyBase):
    """SORTED on a backend with ordered iteration."""

    strategy_name = "SORTED"

    def __init__(self, keys: Keys, backend: StateBackend, settings: Settings | None = None) -> None:
        if not backend.supports_ordered:
            raise UnsupportedSetting(
                f"strategy SORTED needs ordered iteration, which backend {backend.name} does not offer"
            )
        super().__init__(keys, backend, settings)
        self._index = self._index_state("index")
        self._nodes = backend.sorted_map_state("nodes")

    def _key(self, seq: int) -> Any:
        """The ``nodes`` state's key of node ``seq``: ``encode_seq(seq)`` (8 bytes whose byte
        order is the numeric order, so the backend's key order is insertion order). A subclass
        may keep another key with the same order (the heap variant: the int itself)."""
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

    def _trim(self, context: bytes, match: MatchKey) -> None:
        """Remove the expired nodes an input on ``match`` would otherwise read, while the
        expiry sweep lags (docs/ttl.md): the expired leading nodes of ``match``'s chain (so
        its first is the first visible match), then the expired tail nodes
        (:meth:`_trim_tail`). Each removal happens once, as its timer would have made it
        (amortised); a live node costs 1 read."""
        self._trim_chain(context, match)
        self._trim_tail(context)

    def _trim_chain(self, context: bytes, match: MatchKey) -> None:
        """Remove the expired leading nodes of ``match``'s chain: O(1) accesses each."""
        entry = self._index.get(context, match)
        while entry is not None and self._expired(self._node(context, self._key(entry[0]))[STAMP]):
            self._unlink(context, match, entry, entry[0])
            self._note_expired(context)
            entry = self._index.get(context, match)

    def _trim_tail(self, context: bytes) -> tuple[Any, Node] | None:
        """``nodes.last(context)`` after removing expired tail nodes: the last visible node,
        or None if the key is visibly empty. 1 seek, +1 seek and an unlink per removed node.
        An expired tail behind the first node of its chain has its chain's expired leading
        nodes removed first, O(1) each; only a tail whose chain starts with a visible node
        is unlinked from the middle of its chain, O(chain length), once."""
        while True:
            tail: tuple[Any, Node] | None = self._nodes.last(context)
            if tail is None or not self._expired(tail[1][STAMP]):
                return tail
            match = self._match_key(tuple(tail[1][ROW]))
            entry = self._index.get(context, match)
            if entry is None:
                raise missing("index", context, self._seq(tail[0]))
            seq = self._seq(tail[0])
            if entry[0] != seq and self._expired(self._node(context, self._key(entry[0]))[STAMP]):
                self._trim_chain(context, match)
            else:
                self._unlink(context, match, entry, seq)
                self._note_expired(context)

    def _add(self, context: bytes, match: MatchKey, row: StoredRow, stamp: int) -> Change:
        index, nodes = self._index, self._nodes
        if self._lazy:
            self._trim(context, match)
        entry = index.get(context, match)
        if entry is not None and self._upsert:  # rule 4: the first match, in place
            key = self._key(entry[0])
            node = self._node(context, key)
            node[ROW] = row
            if self._restamp_replaced:
                node[STAMP] = stamp
                self._stamped(context, entry[0], stamp)
            nodes.put(context, key, node)
            return self._added(UPDATE_AFTER, row)
        tail = nodes.last(context)
        if tail is None:
            seq = 1
            kind = INSERT
        else:
            seq = self._seq(tail[0]) + 1
            kind = UPDATE_AFTER
        if entry is None:
            entry = [seq, seq]
        else:  # a duplicate: extend the match key's chain
            last = entry[1]
            if tail is not None and last == seq - 1:
                tail_key, tail_node = tail
            else:
                tail_key = self._key(last)
                tail_node = self._node(context, tail_key)
            tail_node[SAME] = seq
            nodes.put(context, tail_key, tail_node)
            entry[1] = seq
        nodes.put(context, self._key(seq), [row, 0, stamp])
        index.put(context, match, entry)
        self._stamped(context, seq, stamp)
        return self._added(kind, row)

    def _unlink(self, context: bytes, match: MatchKey, entry: list[int], seq: int) -> Any:
        """Delete node ``seq`` of the chain ``entry`` of ``match``; returns its key.

        The chain's first node (every rule-6 removal): at most 1 read + 2 writes. A later
        node (TTL expiry only) walks the chain to its predecessor: O(chain length).
        """
        index, nodes = self._index, self._nodes
        first, last = entry
        key = self._key(seq)
        same = 0 if seq == last else self._node(context, key)[SAME]
        nodes.delete(context, key)
        if seq != first:
            before = first
            before_node = self._node(context, self._key(before))
            while before_node[SAME] != seq:
                before = before_node[SAME]
                before_node = self._node(context, self._key(before))
            before_node[SAME] = same
            nodes.put(context, self._key(before), before_node)
            if seq == last:
                entry[1] = before
                index.put(context, match, entry)
        elif same:
            entry[0] = same
            index.put(context, match, entry)
        else:
            index.delete(context, match)
        return key

    def _retract(self, context: bytes, match: MatchKey, change: Change, stamp: int) -> Change | None:
        if self._lazy:
            self._trim(context, match)
        entry = self._index.get(context, match)
        if entry is None:
            self._miss(context, change)
            return None
        key = self._unlink(context, match, entry, entry[0])
        # While the sweep lags, rule 9 looks for the last *visible* node: expired ones go.
        tail = self._trim_tail(context) if self._lazy else self._nodes.last(context)
        if tail is None:
            return emit(DELETE, change.row)
        if tail[0] < key:
            tail_key, tail_node = tail
            if self._restamp_rollback:
                tail_node[STAMP] = stamp
                self._nodes.put(context, tail_key, tail_node)
                self._stamped(context, self._seq(tail_key), stamp)
            return emit(UPDATE_AFTER, tuple(tail_node[ROW]))
        return None

    def _expire_element(self, context: bytes, seq: int) -> None:
        """Remove node ``seq`` if it exists and is expired (its timer may be stale)."""
        node: Node | None = self._nodes.get(context, self._key(seq))
        if node is None or not self._expired(node[STAMP]):
            return
        match = self._match_key(tuple(node[ROW]))
        entry = self._index.get(context, match)
        if entry is None:
            raise missing("index", context, seq)
        self._unlink(context, match, entry, seq)
        self._note_expired(context)

    def _contexts(self) -> list[bytes]:
        return list(self._nodes.contexts())

    def _check(self) -> None:
        """Per stored key: nodes iterate in strictly ascending seq order from 1 up, and the
        index and same links are exactly the same-chains of the nodes' match keys
        (:func:`check_chains`); no index entries of a key without nodes. O(state)."""
        contexts = set(self._nodes.contexts())
        for context in contexts:
            items = list(self._nodes.items(context))
            seqs = [self._seq(key) for key, _ in items]
            require(bool(seqs) and seqs[0] >= 1, context, f"seqs start at {seqs[:1]}")
            ascending = all(a < b for a, b in pairwise(seqs))
            require(ascending, context, "nodes do not iterate in ascending seq order")
            matches = [self._match_key(tuple(node[ROW])) for _, node in items]
            sames = [node[SAME] for _, node in items]
            check_chains(context, seqs, matches, sames, dict(self._index.items(context)))
        orphans = set(self._index.contexts()) - contexts
        require(not orphans, min(orphans, default=b""), "index entries without nodes")

    def _elements(self, context: bytes) -> list[tuple[StoredRow, int]]:
        return [(tuple(node[ROW]), node[STAMP]) for _, node in self._nodes.items(context)]

    def _newest_elements(self, context: bytes, limit: int) -> tuple[list[tuple[StoredRow, int]], bool]:
        """The last ``limit`` nodes by reverse seeks (``last``, then ``before``): at most
        ``limit`` + 1 reads."""
        newest: list[tuple[StoredRow, int]] = []
        entry: tuple[Any, Node] | None = self._nodes.last(context)
        while entry is not None and len(newest) < limit:
            newest.append((tuple(entry[1][ROW]), entry[1][STAMP]))
            entry = self._nodes.before(context, entry[0])
        newest.reverse()
        return newest, entry is not None

    def _drop(self, context: bytes) -> None:
        self._nodes.clear(context)
        self._index.clear(context)

    def _load(self, context: bytes, elements: list[tuple[StoredRow, int]]) -> None:
        same, entries = same_chains([self._match_key(row) for row, _ in elements])
        for position, (row, stamp) in enumerate(elements):
            self._nodes.put(context, self._key(position + 1), [row, same[position], stamp])
            self._stamped(context, position + 1, stamp)
        for match, entry in entries.items():
            self._index.put(context, match, entry)
