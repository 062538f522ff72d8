r"""Byte encodings of state: msgpack values and order-preserving, unambiguous storage keys.

Values are msgpack (``use_bin_type``: ``str`` and ``bytes`` stay apart; ``strict_map_key``
off so integer map keys survive). Integers outside msgpack's 64-bit range use the only
extension type, ``BIG_INT`` (signed big-endian two's complement), which decodes to an int and
nothing else — no extension can construct arbitrary objects, so decoding untrusted state never
executes code. Tuples come back as lists. A value that cannot be decoded raises
:class:`CorruptStateError` naming the state and the key.

Storage keys of byte backends (one flat, byte-ordered key space per database)::

    META                              b"\x00" + name        (format marker and the like)
    value state   s:  b"v" + len(s) + s + context
    map state     s:  b"m" + len(s) + s + len32(context) + context + user key
    sorted map    s:  b"s" + len(s) + s + len32(context) + context + user key

``len(s)`` is one byte (state names are at most 255 UTF-8 bytes), ``len32`` four big-endian
bytes. Because the context is length-prefixed, the *context prefix* (everything before the
user key) of one context is never a prefix of another's, so one context's entries form one
contiguous key range, ordered by user key, that never interleaves with another context's.

LMDB limits keys to 511 bytes and replaces a context or user key that does not fit by its
SHA-256 digest (layout and cost in lmdb.py); RocksDB stores every key as above.
"""

from __future__ import annotations

import struct
from typing import Any

import msgpack

from .base import Value
from .errors import CorruptStateError

BIG_INT = 1  # the msgpack extension code of integers beyond 64 bits
_SEQ = struct.Struct(">Q")
_SEQ_OFFSET = 1 << 63
_LEN32 = struct.Struct(">I")
META_PREFIX = b"\x00"


def encode_seq(number: int) -> bytes:
    """8 bytes, big-endian with the sign bit flipped: byte order equals numeric order.

    Defined for -2**63 <= number < 2**63; ``struct.error`` otherwise. O(1).
    """
    return _SEQ.pack(number + _SEQ_OFFSET)


def decode_seq(data: bytes) -> int:
    """The inverse of :func:`encode_seq`. ValueError unless ``data`` is 8 bytes."""
    if len(data) != 8:
        raise ValueError(f"a sequence number is 8 bytes, got {len(data)}")
    value: int = _SEQ.unpack(data)[0]
    return value - _SEQ_OFFSET


def pack_default(value: Any) -> Any:
    """The msgpack ``default`` hook of state: an int beyond 64 bits as ``BIG_INT``."""
    if isinstance(value, int):  # only reached when the int does not fit 64 bits
        length = (value.bit_length() + 8) // 8
        return msgpack.ExtType(BIG_INT, value.to_bytes(length, "big", signed=True))
    raise TypeError(f"cannot store a {type(value).__name__} in state: {value!r}")


def ext_hook(code: int, data: bytes) -> Any:
    """The msgpack ``ext_hook`` of state: ``BIG_INT`` back to an int; any other type refused."""
    if code == BIG_INT:
        return int.from_bytes(data, "big", signed=True)
    raise ValueError(f"unknown msgpack extension type {code}")


class ValueCodec:
    """msgpack encoder/decoder of values with one reused ``Packer`` (not thread-safe)."""

    def __init__(self) -> None:
        self.pack = msgpack.Packer(use_bin_type=True, default=pack_default).pack

    def unpack(self, data: bytes, state: str, key: bytes) -> Value:
        """Decode one stored value; CorruptStateError naming ``state`` and ``key`` on failure."""
        try:
            return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=ext_hook)
        except Exception as error:
            raise CorruptStateError(
                f"damaged state: state {state!r}: the value stored under key {key!r} cannot be "
                f"decoded ({error or type(error).__name__})"
            ) from error


def state_prefix(kind: bytes, name: str) -> bytes:
    """``kind + len(name) + name``: the prefix of every storage key of one state."""
    encoded = name.encode("utf-8")
    if not 0 < len(encoded) < 256:
        raise ValueError(f"a state name must be 1 to 255 UTF-8 bytes, got {name!r}")
    if kind not in (b"v", b"m", b"s"):
        raise ValueError(f"unknown state kind {kind!r}")
    return kind + bytes([len(encoded)]) + encoded


def context_prefix(state: bytes, context: bytes) -> bytes:
    """The prefix of every storage key of ``context`` in a map state: state + len32 + context."""
    return state + _LEN32.pack(len(context)) + context


def split_context(state: bytes, storage_key: bytes) -> tuple[bytes, bytes]:
    """(context, user key) of a map-state storage key under ``state``; ValueError if malformed."""
    start = len(state) + 4
    if len(storage_key) < start or not storage_key.startswith(state):
        raise ValueError(f"not a key of this state: {storage_key!r}")
    end = start + _LEN32.unpack_from(storage_key, len(state))[0]
    if end > len(storage_key):
        raise ValueError(f"truncated context in key {storage_key!r}")
    return storage_key[start:end], storage_key[end:]


def successor(prefix: bytes) -> bytes | None:
    """The least byte string greater than every string starting with ``prefix``.

    None when there is none (``prefix`` is all 0xff bytes, or empty).
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])
