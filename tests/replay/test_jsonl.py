"""The JSON Lines formats of ``upsertmat replay``: parsing, formatting, bad input."""

from __future__ import annotations

import json

import pytest

from upsertmat.replay.jsonl import (
    BadLine,
    ChangeLine,
    ClockLine,
    RowShape,
    format_change,
    format_clock,
    format_dead_letter,
    format_input_change,
    parse_line,
)
from upsertmat.spec import Change, Keys, RowKind, canonical, delete, insert, update_after, update_before


def change_of(text: str | bytes) -> Change:
    item = parse_line(text)
    assert isinstance(item, ChangeLine)
    return item.change


@pytest.mark.parametrize(
    ("op", "kind"),
    [
        ("+I", RowKind.INSERT),
        ("-U", RowKind.UPDATE_BEFORE),
        ("+U", RowKind.UPDATE_AFTER),
        ("-D", RowKind.DELETE),
    ],
)
def test_each_op_parses_to_its_kind(op: str, kind: RowKind) -> None:
    assert change_of(f'{{"op": "{op}", "row": [1, "a"]}}') == Change(kind, (1, "a"))


def test_ts_is_optional_and_null_means_absent() -> None:
    assert change_of('{"op": "+I", "row": [1], "ts": 17}').ts == 17
    assert change_of('{"op": "+I", "row": [1]}').ts is None
    assert change_of('{"op": "+I", "row": [1], "ts": null}').ts is None


def test_clock_line() -> None:
    assert parse_line('{"time": 1002}') == ClockLine(1002)
    assert parse_line(b'{"time": 0}\n') == ClockLine(0)


@pytest.mark.parametrize("text", ["", "\n", "   \t \r\n", b"\n", "\ufeff\n"])
def test_blank_lines_parse_to_none(text: str | bytes) -> None:
    assert parse_line(text) is None


def test_bytes_with_terminators_and_a_byte_order_mark() -> None:
    assert change_of(b'{"op": "+I", "row": [1]}\r\n') == insert(1)
    assert change_of('\ufeff{"op": "-D", "row": [1]}'.encode()) == delete(1)


def test_values_keep_their_exact_json_types() -> None:
    row = change_of(
        '{"op": "+I", "row": [1, 1.0, true, null, "1", -0.0, 1e100, 12345678901234567890123]}'
    ).row
    assert [type(value) for value in row] == [int, float, bool, type(None), str, float, float, int]
    assert canonical(row) == b'[1,1.0,true,null,"1",-0.0,1e+100,12345678901234567890123]'
    assert change_of('{"op": "+I", "row": [1]}') != change_of('{"op": "+I", "row": [1.0]}')
    assert change_of('{"op": "+I", "row": [1]}') != change_of('{"op": "+I", "row": [true]}')


def test_nested_values_and_unicode_round_trip_unchanged() -> None:
    line = '{"op": "+U", "row": [7, {"z": [1, 2.5, {"b": null, "a": false}], "a": "Zürich ☃ 😀"}, []]}'
    change = change_of(line)
    assert change.kind is RowKind.UPDATE_AFTER
    output = format_change(41, change)
    assert output == '{"in": 41, "op": "+U", "row": ' + line[len('{"op": "+U", "row": ') : -1] + "}\n"
    assert json.loads(output)["row"] == json.loads(line)["row"]  # object key order kept, no escaping
    assert "Zürich ☃ 😀" in output


def test_escaped_surrogate_pairs_are_fine() -> None:
    assert change_of('{"op": "+I", "row": ["\\ud83d\\ude00"]}').row == ("😀",)


def test_format_change_is_one_json_object_per_line() -> None:
    assert format_change(0, insert(1, 10, "a1")) == '{"in": 0, "op": "+I", "row": [1, 10, "a1"]}\n'
    assert format_change(3, delete(1.0, None, True)) == '{"in": 3, "op": "-D", "row": [1.0, null, true]}\n'


def test_input_formatters_round_trip_through_the_parser() -> None:
    for change in (
        insert(1, "a", ts=5),
        update_before(1.0, None),
        update_after([1], {"k": "v"}),
        delete(True),
    ):
        assert change_of(format_input_change(change)) == change
    assert parse_line(format_clock(77)) == ClockLine(77)


def test_dead_letter_record() -> None:
    record = json.loads(format_dead_letter(7, 106, "unknown op '+X'", b'{"op": "+X"}\n'))
    assert record == {"line": 7, "in": 106, "error": "unknown op '+X'", "text": '{"op": "+X"}'}
    assert json.loads(format_dead_letter(1, 0, "bad", b"\xff\xfeok\r\n"))["text"] == "\ufffd\ufffdok"


TOO_DEEP = (
    "arrays and objects nested more than 500 deep (the line's object and its row count as two levels); "
    "such values are not accepted"
)
BAD_LINES = [
    ("nope", "invalid JSON: Expecting value (column 1)"),
    ('{"op": "+I", "row": [1]', "invalid JSON: Expecting ',' delimiter (column 24)"),
    ('{"op": "+I", "row": [1]} x', "invalid JSON: Extra data (column 26)"),
    ('{"op": "+I", "row": [NaN]}', "invalid JSON: NaN is not a JSON number"),
    ('{"op": "+I", "row": [-Infinity]}', "invalid JSON: -Infinity is not a JSON number"),
    ('{"op": "+I", "row": [1e999]}', "invalid JSON: the number 1e999 does not fit a 64-bit float"),
    (
        '{"op": "+I", "row": ["\\udc00"]}',
        "a string holds a lone UTF-16 surrogate escape, which UTF-8 cannot carry",
    ),
    (b'{"op": "+I", "row": ["\xff"]}', "not valid UTF-8 (byte 23 of the line)"),
    ("[1, 2]", "expected a JSON object, got an array"),
    ('"text"', "expected a JSON object, got a string"),
    ("17", "expected a JSON object, got an integer"),
    ("null", "expected a JSON object, got null"),
    ("{}", "expected 'op' (a change) or 'time' (a clock advance); fields found: none"),
    ('{"row": [1]}', "expected 'op' (a change) or 'time' (a clock advance); fields found: 'row'"),
    ('{"op": "+X", "row": [1]}', "unknown op '+X' (expected one of +I, -U, +U, -D)"),
    ('{"op": "+i", "row": [1]}', "unknown op '+i' (expected one of +I, -U, +U, -D)"),
    ('{"op": 1, "row": [1]}', "'op' must be a string (one of +I, -U, +U, -D), got an integer"),
    ('{"op": "+I"}', "missing 'row' (a JSON array of column values)"),
    ('{"op": "+I", "row": {"a": 1}}', "'row' must be a JSON array, got an object"),
    ('{"op": "+I", "row": "1,2"}', "'row' must be a JSON array, got a string"),
    ('{"op": "+I", "row": null}', "'row' must be a JSON array, got null"),
    ('{"op": "+I", "row": [1], "ts": "17"}', "'ts' must be an integer (milliseconds), got a string"),
    (
        '{"op": "+I", "row": [1], "ts": 1.0}',
        "'ts' must be an integer (milliseconds), got a number with a fraction or exponent",
    ),
    ('{"op": "+I", "row": [1], "ts": true}', "'ts' must be an integer (milliseconds), got a boolean"),
    ('{"op": "+I", "row": [1], "ts": -1}', "'ts' must not be negative, got -1"),
    ('{"time": "1 s"}', "'time' must be an integer (milliseconds), got a string"),
    ('{"time": 1e3}', "'time' must be an integer (milliseconds), got a number with a fraction or exponent"),
    ('{"time": null}', "'time' must be an integer (milliseconds), got null"),
    ('{"time": -5}', "'time' must not be negative, got -5"),
    (
        '{"op": "+I", "row": [1], "time": 5}',
        "a line is either a change ('op') or a clock advance ('time'), not both",
    ),
    (
        '{"op": "+I", "row": [1], "Ts": 5}',
        "unknown field(s) 'Ts' (a change has 'op', 'row' and optional 'ts')",
    ),
    ('{"time": 5, "ts": 5, "x": 1}', "unknown field(s) 'ts', 'x' in a clock advance (it has only 'time')"),
    ("[" * 100_000, TOO_DEEP),
    ('{"op": "+I", "row": [1, ' + "[" * 499 + "]" * 499 + "]}", TOO_DEEP),
    (
        '{"time": 4611686018427387904}',
        "'time' must be at most 4611686018427387903 ms (2**62 - 1), got 4611686018427387904",
    ),
    (
        '{"op": "+I", "row": [1], "ts": 1' + "0" * 50 + "}",
        "'ts' must be at most 4611686018427387903 ms (2**62 - 1), got an integer of 167 bits",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_LINES)
def test_bad_lines_are_refused_with_a_message_saying_what_is_wrong(text: str | bytes, message: str) -> None:
    with pytest.raises(BadLine) as caught:
        parse_line(text)
    assert str(caught.value) == message


def test_row_shape_fixes_the_arity_with_the_first_row() -> None:
    shape = RowShape(Keys(pk=(0,), upsert_key=(2,)))
    assert shape.arity is None
    with pytest.raises(BadLine, match=r"^row has 2 column\(s\); the upsert key column 2 is missing"):
        shape.check((1, 2))
    assert shape.arity is None  # a refused row does not fix the arity
    shape.check((1, 2, 3, 4))
    assert shape.arity == 4
    with pytest.raises(BadLine, match=r"^row has 3 column\(s\), expected 4 \(the stream's arity\)$"):
        shape.check((1, 2, 3))
    with pytest.raises(BadLine, match="expected 4"):
        shape.check((1, 2, 3, 4, 5))
    with pytest.raises(BadLine, match="the sink primary key column 0 is missing"):
        shape.check(())


def test_row_shape_with_a_given_arity() -> None:
    shape = RowShape(Keys(pk=(1,)), arity=3)
    with pytest.raises(BadLine, match="expected 3"):
        shape.check((1, 2))
    shape.check((1, 2, 3))
    with pytest.raises(ValueError, match="an arity of 1 leaves out key column 1"):
        RowShape(Keys(pk=(1,)), arity=1)


def test_a_line_nested_exactly_to_the_limit_parses() -> None:
    row = change_of('{"op": "+I", "row": [1, ' + "[" * 498 + "]" * 498 + '], "ts": 4611686018427387903}').row
    assert len(json.dumps(row)) == 2 + 3 + 2 * 498
