from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from upsertmat.conformance.backends import PersistentBackendTests, StateBackendTests, machine_for
from upsertmat.impls.build import is_compiled
from upsertmat.impls.settings import LmdbDurability
from upsertmat.impls.state import CorruptStateError, StateBackend, StateError
from upsertmat.impls.state import lmdb as lmdb_state
from upsertmat.impls.state.codec import META_PREFIX, context_prefix, encode_seq, state_prefix
from upsertmat.impls.state.lmdb import LONG_CONTEXT, LONG_ENTRY, LmdbBackend
from upsertmat.impls.state.rocksdb import RocksdbBackend


def open_lmdb(path: Path | None) -> StateBackend:
    return LmdbBackend(path)


class TestLmdbBackend(StateBackendTests, PersistentBackendTests):
    persistent = True
    engine = "lmdb"
    long_sorted_user_keys = False

    def open(self, path: Path | None) -> StateBackend:
        return open_lmdb(path)


def open_lmdb_every3(path: Path | None) -> StateBackend:
    """A commit interval of 3 units: deferred commits, the per-unit undo journal."""
    backend = LmdbBackend(path)
    backend.commit_interval = 3
    return backend


TestLmdbMachine = machine_for(open_lmdb, persistent=True, long_sorted_user_keys=False).TestCase
TestLmdbEvery3Machine = machine_for(open_lmdb_every3, persistent=True, long_sorted_user_keys=False).TestCase


def test_map_grows_at_commit_boundaries(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "db", map_size=1 << 20)
    try:
        state = backend.map_state("m")
        for n in range(3000):
            state.put(b"c", n.to_bytes(4, "big"), "x" * 1000)  # ~3 MB in all: 3x the first map
            backend.commit()
        assert backend.env.info()["map_size"] > 1 << 20
        assert state.get(b"c", (2999).to_bytes(4, "big")) == "x" * 1000
    finally:
        backend.close()


@pytest.mark.parametrize("durability", list(LmdbDurability), ids=lambda mode: mode.value)
def test_every_durability_mode_persists(tmp_path: Path, durability: LmdbDurability) -> None:
    backend = LmdbBackend(tmp_path / "db", durability=durability)
    backend.sorted_map_state("s").put(b"c", b"k", [1])
    backend.commit()
    backend.close()
    backend = LmdbBackend(tmp_path / "db")
    try:
        assert backend.sorted_map_state("s").last(b"c") == (b"k", [1])
    finally:
        backend.close()


def test_a_sorted_user_key_that_does_not_fit_is_a_clear_error(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "db")
    try:
        state = backend.sorted_map_state("s")
        with pytest.raises(ValueError, match=r"LMDB keys are limited to 511 bytes: sorted map state 's'"):
            state.put(b"c" * 300, b"k" * 300, 1)
        with pytest.raises(ValueError, match=r"at most 472 bytes fit"):
            state.put(b"c" * 5000, b"k" * 473, 1)
        state.put(b"c" * 5000, b"k" * 472, 1)  # fits beside the digest of the context
        state.put(b"c", b"k" * 503, 2)  # fits beside a short context
        assert state.get(b"c" * 300, b"k" * 300) is None  # never stored
        state.delete(b"c" * 300, b"k" * 300)  # no-op
        backend.commit()
        assert list(state.items(b"c" * 5000)) == [(b"k" * 472, 1)]
        assert sorted(state.contexts()) == [b"c", b"c" * 5000]
    finally:
        backend.close()


def _stored_keys(backend: LmdbBackend) -> list[bytes]:
    return [bytes(key) for key in backend.txn.cursor().iternext(keys=True, values=False)]


def test_keys_that_fit_keep_the_plain_layout(tmp_path: Path) -> None:
    """Exactly the codec.py keys (no layout change for keys that fit); long ones are digests."""
    backend = LmdbBackend(tmp_path / "db")
    try:
        backend.value_state("v").put(b"c" * 508, 1)  # 3 + 508 = 511 bytes: fits
        backend.map_state("m").put(b"c" * 500, b"k" * 4, 2)  # 3 + 4 + 500 + 4 = 511
        backend.sorted_map_state("s").put(b"c" * 496, b"\x00" * 8, 3)  # 3 + 4 + 496 + 8 = 511
        backend.sorted_map_state("s").put(b"d", b"k" * 100, 4)
        plain = {
            META_PREFIX + b"format",
            state_prefix(b"v", "v") + b"c" * 508,
            context_prefix(state_prefix(b"m", "m"), b"c" * 500) + b"k" * 4,
            context_prefix(state_prefix(b"s", "s"), b"c" * 496) + b"\x00" * 8,
            context_prefix(state_prefix(b"s", "s"), b"d") + b"k" * 100,
        }
        assert set(_stored_keys(backend)) == plain
        backend.value_state("v").put(b"c" * 509, 5)
        backend.map_state("m").put(b"c" * 500, b"k" * 5, 6)
        backend.sorted_map_state("s").put(b"c" * 497, b"\x00" * 8, 7)
        digest = {
            b"V\x01v" + hashlib.sha256(b"c" * 509).digest(),
            b"m\x01m" + LONG_ENTRY + hashlib.sha256(b"c" * 500).digest() + hashlib.sha256(b"k" * 5).digest(),
            b"s\x01s" + LONG_CONTEXT + hashlib.sha256(b"c" * 497).digest() + b"\x00" * 8,
        }
        assert set(_stored_keys(backend)) == plain | digest
    finally:
        backend.close()


def test_a_directory_of_plain_keys_reads_as_before(tmp_path: Path) -> None:
    """Keys written raw in the codec.py layout (what every earlier version wrote) up to the limit."""
    backend = LmdbBackend(tmp_path / "db")
    pack = backend.codec.pack
    v, m, s = state_prefix(b"v", "v"), state_prefix(b"m", "m"), state_prefix(b"s", "s")
    backend.put(v + b"c" * 508, pack(1))
    backend.put(context_prefix(m, b"c" * 504), pack(2))  # an empty user key under a 504-byte context
    backend.put(context_prefix(m, b"c" * 200) + b"k" * 304, pack(3))
    backend.put(context_prefix(s, b"c" * 496) + encode_seq(1), pack(4))
    backend.put(context_prefix(s, b"c" * 496) + encode_seq(2), pack(5))
    backend.commit()
    backend.close()
    backend = LmdbBackend(tmp_path / "db")
    try:
        assert backend.value_state("v").get(b"c" * 508) == 1
        assert list(backend.value_state("v").contexts()) == [b"c" * 508]
        state = backend.map_state("m")
        assert state.get(b"c" * 504, b"") == 2
        assert list(state.items(b"c" * 200)) == [(b"k" * 304, 3)]
        assert list(state.contexts()) == [b"c" * 200, b"c" * 504]
        assert not state._has_long  # no digest keys: items and clear take one scan, as before
        state.put(b"c" * 200, b"k" * 305, 6)  # does not fit: a digest key beside the plain one
        assert dict(state.items(b"c" * 200)) == {b"k" * 304: 3, b"k" * 305: 6}
        sorted_state = backend.sorted_map_state("s")
        assert sorted_state.last(b"c" * 496) == (encode_seq(2), 5)
        assert sorted_state.before(b"c" * 496, encode_seq(2)) == (encode_seq(1), 4)
        sorted_state.put(b"c" * 496, encode_seq(3), 7)
        assert [value for _, value in sorted_state.items(b"c" * 496)] == [4, 5, 7]
    finally:
        backend.close()


def test_contexts_keep_the_order_of_the_plain_layout(tmp_path: Path) -> None:
    """Long contexts are listed where their plain keys would sort: value states in byte order
    (RocksDB's order too), map states by length, then bytes."""
    contexts = [b"b", b"a" * 600, b"", b"a" * 509, b"b" * 509, b"\xff" * 300, b"a" * 1000, b"z"]
    orders = []
    for backend in (LmdbBackend(tmp_path / "lmdb"), RocksdbBackend(tmp_path / "rocksdb")):
        try:
            for index, context in enumerate(contexts):
                backend.value_state("v").put(context, index)
                backend.map_state("m").put(context, b"k" * (index * 100), index)
                backend.sorted_map_state("s").put(context, encode_seq(index), index)
            backend.commit()
            orders.append(
                [
                    list(backend.value_state("v").contexts()),
                    list(backend.map_state("m").contexts()),
                    list(backend.sorted_map_state("s").contexts()),
                ]
            )
        finally:
            backend.close()
    lmdb_orders, rocksdb_orders = orders
    assert lmdb_orders[0] == rocksdb_orders[0] == sorted(contexts)
    assert lmdb_orders[1] == lmdb_orders[2] == sorted(contexts, key=lambda c: (len(c), c))


@pytest.mark.skipif(
    is_compiled(lmdb_state.__name__),
    reason="a compiled module's functions cannot be patched; the pure build runs this test",
)
def test_a_digest_collision_is_an_error_not_wrong_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lmdb_state, "_digest", lambda data: b"\x00" * 32)  # every key collides
    backend = LmdbBackend(tmp_path / "db")
    first, second = b"c" * 600, b"d" * 600
    try:
        values = backend.value_state("v")
        values.put(first, 1)
        with pytest.raises(CorruptStateError, match="digest collision"):
            values.get(second)
        with pytest.raises(CorruptStateError, match="digest collision"):
            values.put(second, 2)
        with pytest.raises(CorruptStateError, match="digest collision"):
            values.delete(second)
        assert values.get(first) == 1  # untouched
        maps = backend.map_state("m")
        maps.put(first, b"k" * 600, 1)
        for call in (
            lambda: maps.get(second, b"k" * 600),
            lambda: maps.get(first, b"j" * 600),
            lambda: maps.put(second, b"k" * 600, 2),
            lambda: maps.delete(first, b"j" * 600),
            lambda: list(maps.items(second)),
            lambda: maps.clear(second),
        ):
            with pytest.raises(CorruptStateError, match="digest collision"):
                call()
        assert list(maps.items(first)) == [(b"k" * 600, 1)]
        ordered = backend.sorted_map_state("s")
        ordered.put(first, b"1", 1)
        for call in (
            lambda: ordered.get(second, b"1"),
            lambda: ordered.last(second),
            lambda: ordered.ceiling(second, b""),
            lambda: ordered.first(second),
            lambda: ordered.before(second, b"2"),
            lambda: ordered.put(second, b"1", 2),
            lambda: ordered.delete(second, b"1"),
            lambda: ordered.clear(second),
            lambda: list(ordered.items(second)),
            lambda: ordered.get_many([(second, b"1")]),
        ):
            with pytest.raises(CorruptStateError, match="digest collision"):
                call()
        assert list(ordered.items(first)) == [(b"1", 1)]
        backend.commit()
        assert list(ordered.contexts()) == [first]
    finally:
        backend.close()


def test_get_many_routes_long_keys(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "db")
    try:
        contexts = [b"a", b"c" * 600, b"b", b"c" * 509]
        for index, context in enumerate(contexts):
            backend.value_state("v").put(context, index)
            backend.map_state("m").put(context, b"k" * (index * 200), index)
            backend.sorted_map_state("s").put(context, b"k", index)
        backend.commit()
        assert backend.value_state("v").get_many([*contexts, b"x" * 700]) == [0, 1, 2, 3, None]
        pairs = [(context, b"k" * (index * 200)) for index, context in enumerate(contexts)]
        assert backend.map_state("m").get_many([*pairs, (b"a", b"k" * 600)]) == [0, 1, 2, 3, None]
        sorted_pairs = [(context, b"k") for context in contexts]
        assert backend.sorted_map_state("s").get_many([*sorted_pairs, (b"a", b"k" * 600)]) == [
            0,
            1,
            2,
            3,
            None,
        ]
    finally:
        backend.close()


# The hot paths of keys that fit (one Python call per state access) decode inline, inline the
# backend's put/delete and read the cursor without a call: the tests below pin them to the
# codec, the current transaction and the backend's error messages.

AWKWARD_VALUES = [2**70, -(2**70), ("a", b"b"), {1: "x", "k": [None]}, None, 1.5, "s", b"b", []]


def test_the_hot_paths_decode_like_the_codec(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "db")
    try:
        codec = backend.codec
        values, maps, ordered = (
            backend.value_state("v"),
            backend.map_state("m"),
            backend.sorted_map_state("s"),
        )
        for index, value in enumerate(AWKWARD_VALUES):
            expected = codec.unpack(codec.pack(value), "v", b"")
            context = b"c%d" % index
            values.put(context, value)
            maps.put(context, b"k", value)
            ordered.put(context, b"k", value)
            assert values.get(context) == expected
            assert maps.get(context, b"k") == expected
            assert ordered.get(context, b"k") == expected
            for found in (
                ordered.last(context),
                ordered.first(context),
                ordered.ceiling(context, b"k"),
                ordered.before(context, b"l"),
            ):
                assert found == (b"k", expected)
    finally:
        backend.close()


def test_a_damaged_value_is_a_corrupt_state_error_on_every_hot_read(tmp_path: Path) -> None:
    backend = LmdbBackend(tmp_path / "db")
    try:
        values, maps, ordered = (
            backend.value_state("v"),
            backend.map_state("m"),
            backend.sorted_map_state("s"),
        )
        damaged = b"\xc1"  # a byte msgpack never uses
        backend.txn.put(state_prefix(b"v", "v") + b"c", damaged)
        backend.txn.put(context_prefix(state_prefix(b"m", "m"), b"c") + b"k", damaged)
        backend.txn.put(context_prefix(state_prefix(b"s", "s"), b"c") + b"k", damaged)
        for call in (
            lambda: values.get(b"c"),
            lambda: maps.get(b"c", b"k"),
            lambda: ordered.get(b"c", b"k"),
            lambda: ordered.last(b"c"),
            lambda: ordered.first(b"c"),
            lambda: ordered.ceiling(b"c", b""),
            lambda: ordered.before(b"c", b"l"),
        ):
            with pytest.raises(CorruptStateError, match=r"damaged state: state '[vms]'.*cannot be decoded"):
                call()
    finally:
        backend.close()


@pytest.mark.parametrize("interval", [1, 3])
def test_the_hot_paths_follow_the_transaction_through_commits_and_rollbacks(
    tmp_path: Path, interval: int
) -> None:
    """Reads, writes and the cursor are the open transaction's after every durable commit
    (a new transaction) and rollback (interval 1: a new transaction; 3: the journal puts back
    what each put and delete replaced)."""
    backend = LmdbBackend(tmp_path / "db")
    backend.commit_interval = interval
    values, maps, ordered = backend.value_state("v"), backend.map_state("m"), backend.sorted_map_state("s")

    def write(value: int) -> None:
        values.put(b"c", value)
        maps.put(b"c", b"k", value)
        ordered.put(b"c", encode_seq(value), value)

    def check(last: int) -> None:
        assert values.get(b"c") == last and maps.get(b"c", b"k") == last
        assert ordered.last(b"c") == (encode_seq(last), last)
        assert ordered.first(b"c") == (encode_seq(1), 1)

    try:
        for value in range(1, 4):
            write(value)
            backend.commit()
            check(value)
        assert backend.durable_commits == (3 if interval == 1 else 1)
        write(4)
        values.delete(b"c")
        maps.delete(b"c", b"k")
        ordered.delete(b"c", encode_seq(3))
        assert values.get(b"c") is None and maps.get(b"c", b"k") is None
        assert ordered.last(b"c") == (encode_seq(4), 4)
        backend.rollback()
        check(3)
        write(5)
        ordered.delete(b"c", encode_seq(2))
        backend.commit()
        backend.checkpoint()
        assert ordered.before(b"c", encode_seq(5)) == (encode_seq(3), 3)
    finally:
        backend.close()
    backend = LmdbBackend(tmp_path / "db")
    try:
        ordered = backend.sorted_map_state("s")
        assert [key for key, _ in ordered.items(b"c")] == [encode_seq(n) for n in (1, 3, 5)]
        assert backend.value_state("v").get(b"c") == 5 == backend.map_state("m").get(b"c", b"k")
    finally:
        backend.close()


@pytest.mark.parametrize("kind", ["value", "map", "sorted"])
def test_a_put_beyond_the_map_is_the_backends_full_error(tmp_path: Path, kind: str) -> None:
    backend = LmdbBackend(tmp_path / "db", map_size=1 << 20)
    try:
        big = "x" * (2 << 20)
        with pytest.raises(StateError, match=r"is full \(map size \d+ bytes\) within one batch"):
            if kind == "value":
                backend.value_state("v").put(b"c", big)
            elif kind == "map":
                backend.map_state("m").put(b"c", b"k", big)
            else:
                backend.sorted_map_state("s").put(b"c", b"k", big)
    finally:
        backend.close()


def test_a_value_rewritten_within_a_batch_is_written_once(tmp_path: Path) -> None:
    """Issue #30: with a commit interval, a value state's writes wait in an overlay until the
    durable commit, so a history rewritten by every input of a batch is encoded and written
    once per batch, not once per input (LEGACY and VALUE at history 1,000 ran at 0.03-0.2x
    RocksDB without it). Counted in encodings; reads, deletes and a unit's rollback see the
    overlay."""
    backend = LmdbBackend(tmp_path / "db")
    try:
        backend.commit_interval = 1000
        state = backend.value_state("legacy")
        packed: list[object] = []
        pack = state._pack

        def counting_pack(obj: Any) -> bytes:
            packed.append(obj)
            return pack(obj)

        state._pack = counting_pack
        for n in range(400):
            state.put(b"[0]", [[n, "x" * 100]] * 40)
            assert state.get(b"[0]") == [[n, "x" * 100]] * 40
            backend.commit()
        assert list(state.contexts()) == [b"[0]"]
        assert packed == []
        backend.checkpoint()
        assert len(packed) == 1
        state.delete(b"[0]")
        assert state.get(b"[0]") is None and list(state.contexts()) == []
        backend.rollback()  # the unit's delete is undone in the overlay
        assert state.get(b"[0]") == [[399, "x" * 100]] * 40
        state.put(b"[1]", [1])
        backend.commit()
    finally:
        backend.close()
    reopened = LmdbBackend(tmp_path / "db")
    try:  # close wrote nothing the materializer had not committed: [1] was never durable
        assert reopened.value_state("legacy").get(b"[0]") == [[399, "x" * 100]] * 40
        assert reopened.value_state("legacy").get(b"[1]") is None
    finally:
        reopened.close()


def test_seeks_with_a_bound_longer_than_the_key_limit(tmp_path: Path) -> None:
    """``ceiling`` and ``before`` with a user key that makes the storage key longer than LMDB's
    511 bytes (no stored key can be that long: the seek starts from the bound's head) give what a
    sorted list of the stored keys gives, including at both ends of the context."""
    backend = LmdbBackend(tmp_path / "db")
    try:
        ordered = backend.sorted_map_state("s")
        context = b"c" * 496  # 3 + 4 + 496 = 503 bytes of prefix: 8-byte user keys reach the limit
        stored = [b"\x10" * 8, b"\x20" * 8, b"\x30" * 8]
        for value, key in enumerate(stored):
            ordered.put(context, key, value)
        ordered.put(b"d" * 496, b"\x00" * 8, 9)  # a neighbouring context on either side of the seeks
        ordered.put(b"b" * 496, b"\xff" * 8, 8)
        probes = [b"\x00" * 9, b"\x10" * 8 + b"\x00", b"\x20" * 9, b"\x20" * 8 + b"\xff" * 4, b"\x30" * 9]
        probes += [b"\xff" * 9, b"\x10" * 7 + b"\x11\x00", b"\x10" * 8, b"\x30" * 8]
        for probe in probes:
            above = [key for key in stored if key >= probe]
            below = [key for key in stored if key < probe]
            expected_ceiling = (above[0], stored.index(above[0])) if above else None
            expected_before = (below[-1], stored.index(below[-1])) if below else None
            assert ordered.ceiling(context, probe) == expected_ceiling, probe
            assert ordered.before(context, probe) == expected_before, probe
        assert ordered.last(context) == (stored[-1], 2)
        assert ordered.first(context) == (stored[0], 0)
    finally:
        backend.close()
