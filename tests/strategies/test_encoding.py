"""The fast encoding gives the spec's canonical bytes (and errors), byte for byte.

State directories and savepoints store context and match keys, so a single differing byte
would orphan stored state: every case compares against ``upsertmat.spec`` directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from upsertmat.impls.encoding import KeyEncoder, fast_canonical
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
