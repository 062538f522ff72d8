from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from upsertmat.conformance.backends import same
from upsertmat.impls.state import CorruptStateError
from upsertmat.impls.state.codec import (
    ValueCodec,
    context_prefix,
    decode_seq,
    encode_seq,
    split_context,
    state_prefix,
    successor,
)

seqs = st.integers(-(2**63), 2**63 - 1)


@given(seqs, seqs)
def test_seq_byte_order_is_numeric_order(left: int, right: int) -> None:
    assert (encode_seq(left) < encode_seq(right)) == (left < right)
    assert len(encode_seq(left)) == 8
    assert decode_seq(encode_seq(left)) == left


def test_seq_limits() -> None:
    assert encode_seq(-(2**63)) == b"\x00" * 8
    assert encode_seq(0) == b"\x80" + b"\x00" * 7
    assert encode_seq(2**63 - 1) == b"\xff" * 8
    with pytest.raises(struct.error):
        encode_seq(2**63)
    with pytest.raises(struct.error):
        encode_seq(-(2**63) - 1)
    with pytest.raises(ValueError, match="8 bytes"):
        decode_seq(b"\x00")


contexts = st.binary(max_size=6)


@given(contexts, contexts, st.binary(max_size=4), st.binary(max_size=4))
def test_context_ranges_never_interleave(first: bytes, second: bytes, key1: bytes, key2: bytes) -> None:
    state = state_prefix(b"m", "rows")
    one, two = context_prefix(state, first), context_prefix(state, second)
    if first != second:
        assert not one.startswith(two) and not two.startswith(one)
    assert split_context(state, one + key1) == (first, key1)
    assert ((one + key1) < (one + key2)) == (key1 < key2)  # ordered by user key inside a context
    end = successor(one)
    assert end is not None and one + key1 < end
    if first != second:
        other = two + key2
        assert not (one <= other < end)


def test_state_prefixes_are_distinct_and_checked() -> None:
    assert state_prefix(b"m", "a") != state_prefix(b"s", "a")
    assert not state_prefix(b"m", "ab").startswith(state_prefix(b"m", "a"))
    with pytest.raises(ValueError, match="1 to 255"):
        state_prefix(b"m", "")
    with pytest.raises(ValueError, match="kind"):
        state_prefix(b"x", "a")
    assert successor(b"a\xff\xff") == b"b"
    assert successor(b"\xff") is None


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary(),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    ),
    max_leaves=10,
)


@given(json_like)
def test_values_round_trip_exactly(value: object) -> None:
    codec = ValueCodec()
    assert same(codec.unpack(codec.pack(value), "s", b"k"), value)


def test_bad_values_are_clear_errors() -> None:
    codec = ValueCodec()
    with pytest.raises(TypeError, match="cannot store a object"):
        codec.pack(object())
    with pytest.raises(CorruptStateError, match=r"state 'rows'.*b'key'"):
        codec.unpack(b"\xc1", "rows", b"key")
    foreign = msgpack.packb(msgpack.ExtType(42, b"payload"))
    with pytest.raises(CorruptStateError, match="unknown msgpack extension type 42"):
        codec.unpack(foreign, "rows", b"key")
    with pytest.raises(CorruptStateError, match="cannot be decoded"):
        codec.unpack(b"\xa2\xff\xfe", "rows", b"key")  # a str that is not UTF-8
