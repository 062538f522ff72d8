"""The fast path of the canonical encoding: the same bytes as the spec's, computed faster.

:func:`upsertmat.spec.encoding.canonical` (compact JSON, sorted object keys, Python's float
repr, UTF-8) defines the bytes of every context key and match key, and state directories and
savepoints already store those bytes, so this module never changes a byte; it only takes a
cheaper road where that road is known to give the same bytes:

* **orjson** serializes a flat sequence of ``str``, ``int``, ``bool`` and ``None`` exactly as
  the canonical encoder does (compact separators; the same string escapes: backslash forms
  for the quote, the backslash, backspace, form feed, newline, return and tab, ``u00XX`` for
  the other control characters, every other character as UTF-8; integers in decimal). It
  is used only when every value's type is one of those four *exactly* (a C-level set
  check), and it raises for what it does not carry the same way (integers beyond 64 bits,
  lone surrogates), in which case the canonical path runs and gives the bytes, or the
  error, it always gave.
* A key of one ``int`` column (the usual sink or upsert key) below 2**63 in magnitude is
  formatted directly, ``b"[%d]" % value``: the decimal text JSON writes for an integer. Measured
  inside the event loop of a byte backend this costs ~0.1 us against ~0.7 us for the orjson
  call, whose code and tables the storage engine's work keeps evicting from the CPU caches
  (in a tight loop of its own orjson is as fast). A larger integer takes the canonical path
  (beyond the interpreter's int-to-text digit limit, that path raises its error).
* Floats, nested lists and objects, subclasses of the scalar types, and anything else go to
  the canonical path: orjson's float text differs (``1e16`` against Python's ``1e+16``) and
  it writes NaN as ``null`` where the canonical encoding refuses it.

:class:`KeyEncoder` turns a row into its (context key, match key) in one call: the key
columns are picked with C-level getters, and the match key of the default (canonical)
equalizer takes the same fast path; any other equalizer is asked through its ``normalize``
exactly as :meth:`upsertmat.spec.Keys.match_key` asks it. A row too short for the keys gets
the spec's own error (same type, same message). ``tests/strategies/test_encoding.py`` checks
the bytes against the spec with Hypothesis, floats, big integers and surrogates included.
Cost: one orjson call (about 0.1 us) per key instead of a projection plus ``json.dumps``
(about 1-2 us).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any, Final

import orjson
from mypy_extensions import mypyc_attr

from ..spec import Keys
from ..spec.encoding import JsonValue, canonical
from ..spec.equalizer import CanonicalEqualizer
from .rows import MatchKey, StoredRow

__all__ = ["KeyEncoder", "fast_canonical", "row_token", "token_of"]

_dumps = orjson.dumps
_loads = orjson.loads
_isascii: Final = str.isascii
"""``str.isascii`` bound once: in the compiled build ``text.isascii()`` is a generic method call
(a type lookup per call), the method descriptor is one vectorcall."""
_FAST_TYPES = frozenset({str, int, bool, type(None)})
_fast_types = _FAST_TYPES.issuperset

KeysOf = Callable[[StoredRow], tuple[bytes, bytes]]


def fast_canonical(values: Sequence[JsonValue]) -> bytes:
    """``canonical(values)``, byte for byte (and error for error), through orjson when exact.

    The result owns no more memory than its contents: orjson hands out its output in a bytes
    object that keeps its ~4 KB working buffer (a 108-byte result traces 4,489 bytes), so the
    result is copied to an object of its own size (one small allocation; a stored key would
    otherwise hold 4 KB). O(size of the values).
    """
    if _fast_types(map(type, values)):
        try:
            return b"%b" % _dumps(values)
        except TypeError:  # an integer beyond 64 bits, a lone surrogate, a non-list sequence
            pass
    return canonical(values)


def _plain(value: object) -> bool:
    """Whether ``value`` may stand for its own canonical encoding in a row token: exactly a
    ``str`` of ASCII characters (its encoding cannot fail, and equal strings encode alike),
    exactly an ``int`` of magnitude up to ``2**62 - 1`` (its decimal text), or None. Never a
    bool or a float (``1 == True == 1.0`` in Python, but their encodings differ), nor a
    subclass (which may compare in its own way)."""
    kind = type(value)
    if kind is str:
        text: str = value  # type: ignore[assignment]
        return text.isascii()
    if kind is int:
        number: int = value  # type: ignore[assignment]
        return -_SHORT <= number <= _SHORT
    return value is None


def row_token(row: StoredRow) -> MatchKey:
    """The token of a whole row's canonical match key (:data:`~.rows.MatchKey`, no upsert key,
    the canonical equalizer): the row itself as a tuple when every value is :func:`_plain`, else
    its canonical bytes, or, if those bytes decode to plain values only (a subclass of ``int``
    or ``str`` encodes as its base does), the tuple of those values.

    Exact by construction: the token is a function of the canonical bytes alone (plain values
    round-trip through the encoding unchanged, and decoding gives the bytes' one tuple), and
    two tuples of plain values are equal exactly when their encodings are (the JSON types
    differ where the Python types do: ``1`` and ``"1"`` and ``null`` are distinct; a bool or
    a float never takes the tuple road). A tuple is never equal to bytes. No bytes are formatted
    and nothing is stored beside the row for the usual row: the token is the stored row object.
    Raises what :func:`~upsertmat.spec.encoding.canonical` raises for a row it refuses.
    O(number of columns) for plain rows; O(size of the row) otherwise."""
    for value in row:
        if not _plain(value):
            return _decoded_token(fast_canonical(row))
    return row if type(row) is tuple else tuple(row)


def _decoded_token(encoded: bytes) -> MatchKey:
    """:func:`row_token` of canonical bytes: the tuple of their values if all are plain."""
    try:
        values = _loads(encoded)
    except ValueError:  # beyond what orjson reads (huge integers, deep nesting): not plain
        return encoded
    if type(values) is list:
        decoded: list[object] = values
        for value in decoded:
            if not _plain(value):
                return encoded
        return tuple(decoded)
    return encoded


_SMALL: Final = 1 << 63
"""Integers of magnitude below this are formatted directly; larger ones take the canonical
path (the same bytes; and beyond the interpreter's int-to-text digit limit, its error). The
bound keeps the compiled build's ``%d`` away from huge integers, whose error path it mishandles."""

_SHORT: Final = 4611686018427387903
"""``2**62 - 1``: :meth:`KeyEncoder.pair` formats integers of magnitude up to this inline (in
the compiled build a comparison with it is a C comparison: it is the largest "short" int of
mypyc's tagged representation); larger ones take ``keys_of`` (the same bytes)."""


def token_of(match: bytes) -> MatchKey:
    """The token of a one-column match key's canonical bytes (:data:`~.rows.MatchKey`): the
    int ``n`` when ``match`` is exactly ``b"[%d]" % n`` with ``|n| <= 2**62 - 1``, else
    ``match`` itself. A function of the bytes alone, so tokens are equal exactly when their
    bytes are (an int is never equal to bytes). O(len(match))."""
    if 2 < len(match) < 24 and match[0] == 0x5B and match[-1] == 0x5D:  # [ ... ]
        try:
            value = int(match[1:-1])
        except ValueError:
            return match
        if -_SHORT <= value <= _SHORT and b"[%d]" % value == match:
            return value
    return match


def _single(column: int) -> Callable[[StoredRow], bytes]:
    """The canonical encoding of the one-column projection ``(row[column],)``."""

    def encode(row: StoredRow) -> bytes:
        value = row[column]
        if type(value) is int:
            if -_SMALL < value < _SMALL:
                return b"[%d]" % value
        elif type(value) in _FAST_TYPES:
            try:
                return b"%b" % _dumps((value,))  # a copy: see fast_canonical
            except TypeError:
                pass
        return canonical((value,))

    return encode


def _projection(columns: tuple[int, ...]) -> Callable[[StoredRow], bytes]:
    """The canonical encoding of the projection of a row on ``columns`` (in that order)."""
    if len(columns) == 1:
        return _single(columns[0])
    pick = itemgetter(*columns)

    def encode(row: StoredRow) -> bytes:
        values: tuple[JsonValue, ...] = pick(row)
        return fast_canonical(values)

    return encode


@mypyc_attr(allow_interpreted_subclasses=True)
class KeyEncoder:
    """The (context key, match key) of rows for one :class:`~upsertmat.spec.Keys`.

    ``keys_of(row)`` equals ``(keys.context_key(row), keys.match_key(row))`` for every row,
    and raises what those raise (in that order) for a row too short for the keys.
    ``match_key(row)`` equals ``keys.match_key(row)``. O(size of the key columns) each.
    """

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self._width = keys.max_column() + 1
        context = _projection(keys.pk)
        match: Callable[[StoredRow], bytes]
        if type(keys.equalizer) is CanonicalEqualizer:
            match = _projection(keys.upsert_key) if keys.upsert_key else fast_canonical
        else:
            match = keys.match_key
        self._context = context
        self._match = match
        canonical_match = type(keys.equalizer) is CanonicalEqualizer
        self.keys_of: KeysOf = self._build()
        # The usual shape, inlined by :meth:`pair`: one sink-key and one upsert-key column,
        # the canonical equalizer. ``_last_sink``/``_last_context`` remember the last sink key
        # formatted there (a valid pair from the start).
        self._one_column = len(keys.upsert_key) == 1 and canonical_match
        self._int_pair = len(keys.pk) == 1 and self._one_column
        self._pk = keys.pk[0] if keys.pk else 0
        self._uk = keys.upsert_key[0] if keys.upsert_key else 0
        self._last_sink = 0
        self._last_context = b"[0]"
        self._tokens = False  # :meth:`use_tokens`
        self._whole_row = not keys.upsert_key and canonical_match  # tokens: :func:`row_token`
        self._whole_tokens = False  # :meth:`use_tokens` where ``_whole_row``
        self._one_sink = len(keys.pk) == 1

    def _build(self) -> KeysOf:
        width, context, match, keys = self._width, self._context, self._match, self.keys
        canonical_match = type(keys.equalizer) is CanonicalEqualizer
        if len(keys.pk) == 1 and len(keys.upsert_key) == 1 and canonical_match:
            return self._build_two_columns(keys.pk[0], keys.upsert_key[0])

        def keys_of(row: StoredRow) -> tuple[bytes, bytes]:
            if len(row) < width:  # let the spec raise its own error, in its own order
                return keys.context_key(row), keys.match_key(row)
            return context(row), match(row)

        return keys_of

    def _build_two_columns(self, pk: int, upsert_key: int) -> KeysOf:
        """``keys_of`` for one sink-key and one upsert-key column (the usual shape): both
        ints are formatted in one call (as :func:`_single` does), anything else goes through
        the two projections."""
        width, context, match, keys = self._width, self._context, self._match, self.keys

        def keys_of(row: StoredRow) -> tuple[bytes, bytes]:
            if len(row) < width:  # let the spec raise its own error, in its own order
                return keys.context_key(row), keys.match_key(row)
            sink, upsert = row[pk], row[upsert_key]
            if (
                type(sink) is int
                and type(upsert) is int
                and -_SMALL < sink < _SMALL
                and -_SMALL < upsert < _SMALL
            ):
                return b"[%d]" % sink, b"[%d]" % upsert
            return context(row), match(row)

        return keys_of

    def use_tokens(self) -> None:
        """From now on :meth:`pair` and :meth:`match_token` give match keys as tokens
        (:data:`~.rows.MatchKey`) where the match key is one column under the canonical
        equalizer: an int column's value is then its own match key, with no bytes formatted
        or hashed; and where rows match whole (no upsert key, the canonical equalizer), the
        token is :func:`row_token`'s, usually the row itself. For layouts that never store match
        keys at rest (the heap variants)."""
        self._tokens = True
        self._whole_tokens = self._whole_row

    def pair(self, row: StoredRow) -> tuple[bytes, MatchKey]:
        """``keys_of(row)``, for the strategies' per-input loops (the match key as a token
        after :meth:`use_tokens`): a tuple row of the usual shape (one sink-key and one
        upsert-key column holding ints of magnitude below 2**62, the canonical equalizer) is
        formatted here, and its context key is the last one's bytes object when the sink key
        repeats (no formatting, and its hash is cached); anything else goes through
        ``keys_of``. O(1) for the usual shape."""
        if self._int_pair and type(row) is tuple and len(row) >= self._width:
            sink = row[self._pk]
            upsert = row[self._uk]
            if (
                type(sink) is int
                and type(upsert) is int
                and -_SHORT <= sink <= _SHORT
                and -_SHORT <= upsert <= _SHORT
            ):
                # The token is the column's own object: ``upsert`` is a narrowed (unboxed) int in
                # the compiled build, and returning it would box a new one.
                match: MatchKey = row[self._uk] if self._tokens else b"[%d]" % upsert
                if sink == self._last_sink:
                    return self._last_context, match
                context = b"[%d]" % sink
                self._last_sink = sink
                self._last_context = context
                return context, match
        if self._whole_tokens:
            return self._whole_pair(row)
        context, encoded = self.keys_of(row)
        if self._tokens and self._one_column:
            return context, token_of(encoded)
        return context, encoded

    def _whole_pair(self, row: StoredRow) -> tuple[bytes, MatchKey]:
        """:meth:`pair` where rows match whole, as tokens: a tuple row of plain values
        (:func:`_plain`) with one int sink-key column is tested in one pass and its token is
        the row itself; its context key is formatted here, or is the last one's bytes object
        when the sink key repeats. Anything else: :meth:`_sink_context` and :meth:`_row_token`
        (the same keys, and the same errors in the same order)."""
        if self._one_sink and type(row) is tuple and len(row) >= self._width:
            values: tuple[Any, ...] = row
            for value in values:
                kind = type(value)
                if kind is str:
                    if not _isascii(value):
                        return self._sink_context(row), row_token(row)
                elif kind is int:
                    number: int = value
                    if number < -_SHORT or number > _SHORT:
                        return self._sink_context(row), row_token(row)
                elif value is not None:
                    return self._sink_context(row), row_token(row)
            sink = values[self._pk]
            if type(sink) is int:  # a plain int: within +-_SHORT
                if sink == self._last_sink:
                    return self._last_context, row
                context = b"[%d]" % sink
                self._last_sink = sink
                self._last_context = context
                return context, row
        return self._sink_context(row), self._row_token(row)

    def _row_token(self, row: StoredRow) -> MatchKey:
        """:func:`row_token`, with the test of a tuple row's values written out (the usual
        row: one call, no call per value)."""
        if type(row) is tuple:
            values: tuple[Any, ...] = row
            for value in values:
                kind = type(value)
                if kind is str:
                    if not _isascii(value):
                        return row_token(row)
                elif kind is int:
                    number: int = value
                    if number < -_SHORT or number > _SHORT:
                        return row_token(row)
                elif value is not None:
                    return row_token(row)
            return row
        return row_token(row)

    def _sink_context(self, row: StoredRow) -> bytes:
        """:meth:`context_key`, formatted inline for one int sink-key column of a tuple row
        (the last one's bytes object when the sink key repeats, as in :meth:`pair`)."""
        if self._one_sink and type(row) is tuple and len(row) >= self._width:
            sink = row[self._pk]
            if type(sink) is int and -_SHORT <= sink <= _SHORT:
                if sink == self._last_sink:
                    return self._last_context
                context = b"[%d]" % sink
                self._last_sink = sink
                self._last_context = context
                return context
        return self.context_key(row)

    def match_token(self, row: StoredRow) -> MatchKey:
        """:meth:`match_key` as a token after :meth:`use_tokens` (else the bytes)."""
        if self._tokens and self._one_column:
            if len(row) >= self._width:
                value = row[self._uk]
                if type(value) is int and -_SHORT <= value <= _SHORT:
                    return value
            return token_of(self.match_key(row))
        if self._tokens and self._whole_row:
            return self._row_token(row)
        return self.match_key(row)

    def match_key(self, row: StoredRow) -> bytes:
        """``keys.match_key(row)`` (rule 2)."""
        if len(row) < self._width:
            return self.keys.match_key(row)
        return self._match(row)

    def context_key(self, row: StoredRow) -> bytes:
        """``keys.context_key(row)``."""
        if len(row) < self._width:
            return self.keys.context_key(row)
        return self._context(row)
