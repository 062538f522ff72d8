"""The fast encoding gives the spec's canonical bytes (and errors), byte for byte.

State directories and savepoints store context and match keys, so a single differing byte
would orphan stored state: every case compares against ``upsertmat.spec`` directly.
"""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Callable
from enum import IntEnum

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from upsertmat.impls.encoding import KeyEncoder, fast_canonical, row_token, token_of
from upsertmat.spec import JsonValue, Keys, Row
from upsertmat.spec.encoding import canonical
from upsertmat.spec.equalizer import (
    DEFAULT_EQUALIZER,
    CaseInsensitiveEqualizer,
    IgnoreColumnsEqualizer,
)

# Every code point, lone surrogates included (Hypothesis leaves them out by default).
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 1e16, 1e-7, 1e22, 123456789012345678.0, 2**63, 2**64, -(2**63) - 1]),
    ANY_TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(ANY_TEXT, inner, max_size=3),
    max_leaves=6,
)
ROWS = st.lists(VALUES, max_size=5).map(tuple)


def outcome(encode: Callable[[], bytes]) -> bytes | type[BaseException]:
    """The bytes, or the type of the error raised."""
    try:
        return encode()
    except Exception as error:
        return type(error)


@given(ROWS)
@example(('\x00\x1f\x7f"\\\n\r\t\b\f\u2028\U0001f600',))
@example((2**64 - 1, 2**64, -(2**63), -(2**63) - 1))
@example((1, 1.0, True, "1", None))
@example((math.nan,))
@example(("\ud800",))
@example(({"b": 1, "a": [1.5, {"d": None, "c": True}]},))
def test_fast_canonical_is_canonical(row: Row) -> None:
    assert outcome(lambda: fast_canonical(row)) == outcome(lambda: canonical(row))
    assert outcome(lambda: fast_canonical(list(row))) == outcome(lambda: canonical(list(row)))


KEYS = [
    Keys(pk=(0,)),
    Keys(pk=(0,), upsert_key=(1,)),
    Keys(pk=(1, 0), upsert_key=(2, 0)),
    Keys(pk=(2,), upsert_key=(1,), equalizer=CaseInsensitiveEqualizer()),
    Keys(pk=(0,), equalizer=IgnoreColumnsEqualizer([1])),
    Keys(pk=(0, 1), equalizer=DEFAULT_EQUALIZER),
]


@pytest.mark.parametrize("keys", KEYS, ids=repr)
@given(row=ROWS)
@example(row=())
@example(row=(1,))
@example(row=(1, 2**80, "X"))
@example(row=(1.0, True, "Straße"))
@example(row=(-(2**63) - 1, 2**64, 0))
@example(row=(10**5000, -(10**5000), 1))  # beyond the int-to-text digit limit: canonical's error
@example(row=(True, False, -0))
def test_key_encoder_matches_the_spec_keys(keys: Keys, row: Row) -> None:
    encoder = KeyEncoder(keys)
    expected_context = outcome(lambda: keys.context_key(row))
    expected_match = outcome(lambda: keys.match_key(row))
    both = outcome(lambda: b"|".join(encoder.keys_of(row)))
    if isinstance(expected_context, bytes) and isinstance(expected_match, bytes):
        assert encoder.keys_of(row) == (expected_context, expected_match)
    else:  # the first error the spec raises, in its order (context key first)
        first = expected_context if not isinstance(expected_context, bytes) else expected_match
        assert both == first
    assert outcome(lambda: encoder.match_key(row)) == expected_match
    assert outcome(lambda: encoder.context_key(row)) == expected_context


def test_short_row_error_message_is_the_specs() -> None:
    keys = Keys(pk=(0,), upsert_key=(3,))
    row: tuple[JsonValue, ...] = (1, 2)
    with pytest.raises(IndexError) as spec_error:
        keys.match_key(row)
    with pytest.raises(IndexError) as fast_error:
        KeyEncoder(keys).keys_of(row)
    assert str(fast_error.value) == str(spec_error.value)


@pytest.mark.parametrize("keys", KEYS, ids=repr)
@given(row=ROWS)
@example(row=(1, 2, "x"))
@example(row=(2**62, 2**62 - 1, 0))
@example(row=(-(2**62) + 1, -(2**62), 0))
@example(row=(True, 1, 0))
def test_pair_is_keys_of(keys: Keys, row: Row) -> None:
    """``pair`` (the loops' entry) gives ``keys_of``'s bytes and errors, for tuples and lists,
    the second time too (the remembered context key)."""
    encoder = KeyEncoder(keys)
    for shaped in (row, row, list(row), row):
        assert outcome(lambda: b"|".join(encoder.pair(shaped))) == outcome(  # noqa: B023
            lambda: b"|".join(encoder.keys_of(shaped))  # noqa: B023
        )


@pytest.mark.parametrize("keys", KEYS, ids=repr)
@given(row=ROWS)
@example(row=(1, 2, "x"))
@example(row=(2**62, 1, "x"))
@example(row=(None, 1, "x"))
@example(row=(True, 1, "x"))
@example(row=(1, True, "x"))
@example(row=(1, 2, "\ud800"))
@example(row=("\ud800", 2, 1.5))
def test_pair_with_tokens_is_keys_of(keys: Keys, row: Row) -> None:
    """After ``use_tokens``, ``pair`` gives ``keys_of``'s context key and, as the match key,
    the token of ``keys_of``'s (whole rows: :func:`row_token` of the row), or ``keys_of``'s
    first error; the second time too (the remembered context key)."""
    encoder = KeyEncoder(keys)
    encoder.use_tokens()
    whole = not keys.upsert_key and keys.equalizer is DEFAULT_EQUALIZER
    one_column = len(keys.upsert_key) == 1 and keys.equalizer is DEFAULT_EQUALIZER

    def expected(shaped: Row) -> object:
        context, match = KeyEncoder(keys).keys_of(shaped)
        if whole:
            return context, row_token(shaped)
        return context, token_of(match) if one_column else match

    for shaped in (row, row, list(row), row):
        assert outcome(lambda: encoder.pair(shaped)) == outcome(lambda: expected(shaped))  # type: ignore[arg-type,return-value]  # noqa: B023


class Small(IntEnum):
    """An int subclass: its canonical text is the int's, so it matches the int (rule 2)."""

    FIVE = 5


TOKEN_VALUES = st.one_of(SCALARS, st.sampled_from([Small.FIVE, 5, 2**62 - 1, 2**62, -(2**62) + 1, "5", 5.0]))


@given(first=TOKEN_VALUES, second=TOKEN_VALUES)
@example(first=Small.FIVE, second=5)
@example(first=True, second=1)
@example(first=2**62 - 1, second=2**62)
@example(first=5.0, second=5)
def test_tokens_are_equal_exactly_when_the_match_keys_are(first: JsonValue, second: JsonValue) -> None:
    """The heap layouts' match tokens (``use_tokens``): the int of ``[n]``, else the bytes,
    whichever path computed them, so two rows match exactly as their canonical keys do."""
    keys = Keys(pk=(0,), upsert_key=(1,))
    encoder = KeyEncoder(keys)
    encoder.use_tokens()
    rows = [(0, first, "a"), (0, second, "b")]
    matches = [outcome(lambda: keys.match_key(row)) for row in rows]  # noqa: B023
    if not all(isinstance(match, bytes) for match in matches):
        return
    tokens = [encoder.pair(row)[1] for row in rows]
    assert tokens == [encoder.match_token(row) for row in rows]
    assert tokens == [encoder.match_token(list(row)) for row in rows]
    assert tokens == [token_of(match) for match in matches]  # type: ignore[arg-type]
    assert (tokens[0] == tokens[1]) == (matches[0] == matches[1])
    assert all(type(token) in (int, bytes) for token in tokens)


@pytest.mark.parametrize(
    ("encoded", "token"),
    [
        (b"[5]", 5),
        (b"[-5]", -5),
        (b"[0]", 0),
        (b"[4611686018427387903]", 2**62 - 1),
        (b"[-4611686018427387903]", -(2**62) + 1),
        (b"[4611686018427387904]", b"[4611686018427387904]"),
        (b"[05]", b"[05]"),
        (b"[-0]", b"[-0]"),
        (b"[ 5]", b"[ 5]"),
        (b"[1_0]", b"[1_0]"),
        (b"[5.0]", b"[5.0]"),
        (b'["5"]', b'["5"]'),
        (b"[true]", b"[true]"),
        (b"[]", b"[]"),
        (b"[5,6]", b"[5,6]"),
    ],
)
def test_token_of(encoded: bytes, token: object) -> None:
    assert token_of(encoded) == token
    assert type(token_of(encoded)) is type(token)


class Word(str):
    """A str subclass: canonically the string it holds, so it matches the str (rule 2)."""

    __slots__ = ()


ROW_TOKEN_VALUES = st.one_of(
    SCALARS, st.sampled_from([Small.FIVE, 5, 2**62 - 1, 2**62, "5", 5.0, True, 1, Word("a"), "a", "\u00e9"])
)


@given(first=st.lists(ROW_TOKEN_VALUES, max_size=3), second=st.lists(ROW_TOKEN_VALUES, max_size=3))
@example(first=[Small.FIVE], second=[5])
@example(first=[Word("a")], second=["a"])
@example(first=[True], second=[1])
@example(first=[1.0], second=[1])
@example(first=[None], second=["null"])
@example(first=["\u00e9"], second=["\u00e9"])
@example(first=[2**62], second=[2**62])
@example(first=["\ud800"], second=["\ud800"])
def test_row_tokens_are_equal_exactly_when_the_match_keys_are(
    first: list[JsonValue], second: list[JsonValue]
) -> None:
    """Whole-row tokens (no upsert key, ``use_tokens``): the row itself when its values are
    plain, else a function of the canonical bytes, so two rows match exactly as their
    canonical keys do; a row the encoding refuses raises the spec's error."""
    keys = Keys(pk=(0,))
    encoder = KeyEncoder(keys)
    encoder.use_tokens()
    rows = [(0, *first), (0, *second)]
    matches = [outcome(lambda: keys.match_key(row)) for row in rows]  # noqa: B023
    tokens = [outcome(lambda: encoder.pair(row)[1]) for row in rows]  # noqa: B023
    for match, token, row in zip(matches, tokens, rows, strict=True):
        if not isinstance(match, bytes):
            assert token == match  # the same error type
            continue
        assert token == encoder.match_token(row) == encoder.match_token(list(row)) == row_token(list(row))
        assert type(token) in (tuple, bytes)
    if all(isinstance(match, bytes) for match in matches):
        assert (tokens[0] == tokens[1]) == (matches[0] == matches[1])


def test_a_plain_row_is_its_own_token() -> None:
    """No bytes formatted and nothing stored beside the row for the usual whole row."""
    encoder = KeyEncoder(Keys(pk=(0,)))
    encoder.use_tokens()
    row = (0, 1, "payload", None)
    assert encoder.pair(row)[1] is row
    assert encoder.match_token(row) is row


def test_fast_canonical_keeps_no_larger_buffer() -> None:
    """orjson's output keeps its ~4 KB working buffer; the bytes returned are a copy of their
    own size (a stored key would otherwise hold 4 KB: issue #30). Counted with tracemalloc."""
    assert fast_canonical((1, 2, "x" * 100)) == canonical((1, 2, "x" * 100))
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [fast_canonical((1, index, "x" * 100)) for index in range(100)]
        kept += [KeyEncoder(Keys(pk=(1,), upsert_key=(2,))).context_key((0, "x" * 100, 1))]
        per_key = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert per_key < 400, per_key
