"""Safe encoding of savepoint data files: msgpack framing, rows as JSON text.

A data file is a msgpack stream: a header map, one ``[context key (bin), [[row, stamp],
...]]`` array per context key, and a trailer ``{"end": count}``. A row is its JSON text
(``json.dumps`` without key sorting), which keeps every JSON type exactly (``1``, ``1.0``,
``true``, big integers, object key order) without msgpack extension types.

Decoding never executes code: msgpack is read with ``raw=False``, string map keys only, no
extension types (any is refused) and bounded buffer and container sizes; JSON is parsed by
the standard library with NaN and infinities refused. A stamp is an integer of magnitude at
most :data:`~upsertmat.impls.settings.MAX_TIME_MS`, as state holds it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import msgpack

from ...spec import Element, JsonValue, Row
from ..settings import MAX_TIME_MS

MAX_BUFFER = 1 << 30
"""Largest single msgpack object accepted (1 GiB); bounds memory when reading a hostile file."""

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def encode_row(row: Row) -> str:
    """The JSON text of a row. ValueError for values JSON cannot carry (NaN)."""
    return _ENCODER.encode(list(row))


def _no_constants(name: str) -> JsonValue:
    raise ValueError(f"{name} is not a JSON value")


def decode_row(text: object) -> Row:
    """A row from its JSON text; ValueError unless it is a JSON array."""
    if not isinstance(text, str):
        raise ValueError("a row is not JSON text")
    value = json.loads(text, parse_constant=_no_constants)
    if not isinstance(value, list):
        raise ValueError("a row is not a JSON array")
    return tuple(value)


def _refuse_ext(code: int, data: bytes) -> object:
    raise ValueError(f"msgpack extension type {code} is not allowed in a savepoint")


def packer() -> msgpack.Packer:
    """The packer of data files (bin type for bytes, no default hook: only plain types)."""
    return msgpack.Packer(use_bin_type=True, autoreset=True)


def pack_entry(context: bytes, elements: list[Element]) -> list[Any]:
    """The msgpack structure of one context key's elements. ValueError for a stamp
    :func:`unpack_entry` would refuse."""
    for _, stamp in elements:
        if abs(stamp) > MAX_TIME_MS:
            raise ValueError(f"a stamp of {stamp} ms is beyond {MAX_TIME_MS}; state cannot hold it")
    return [context, [[encode_row(row), int(stamp)] for row, stamp in elements]]


def unpacker(stream: IO[bytes]) -> Iterator[Any]:
    """The objects of a msgpack stream, decoded with the strict limits above."""
    reader = msgpack.Unpacker(
        stream,
        raw=False,
        strict_map_key=True,
        ext_hook=_refuse_ext,
        max_buffer_size=MAX_BUFFER,
        use_list=True,
    )
    return iter(reader)


def unpack_entry(entry: object) -> tuple[bytes, list[Element]]:
    """Validate the shape of one entry and decode its rows. ValueError on any deviation."""
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], bytes)):
        raise ValueError("an entry is not [context key, elements]")
    context, raw_elements = entry
    if not isinstance(raw_elements, list) or not raw_elements:
        raise ValueError("an entry's elements are not a non-empty list")
    elements: list[Element] = []
    for item in raw_elements:
        if not (isinstance(item, list) and len(item) == 2):
            raise ValueError("an element is not [row, stamp]")
        stamp = item[1]
        if not isinstance(stamp, int) or isinstance(stamp, bool) or abs(stamp) > MAX_TIME_MS:
            raise ValueError(f"an element's stamp is not an integer of magnitude at most {MAX_TIME_MS}")
        elements.append((decode_row(item[0]), stamp))
    return context, elements
