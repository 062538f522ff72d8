"""The JSON Lines formats of ``upsertmat replay`` (docs/cli.md): parse input, format output.

Input, one JSON object per line:

- a change ``{"op": "+I", "row": [1, 1, "a1"], "ts": 17}``: ``op`` one of ``+I -U +U -D``,
  ``row`` a JSON array, ``ts`` an optional non-negative integer (event time, ms; ``null`` is
  the same as absent);
- a clock advance ``{"time": 1002}``: a non-negative integer (ms).

Any other field is refused, so a typo (``"Ts"``) cannot silently drop a value. A line holding
only whitespace is *blank*: :func:`parse_line` returns None for it. Times (``ts``, ``time``)
are at most :data:`~upsertmat.impls.settings.MAX_TIME_MS`, and a line nests arrays and objects
at most :data:`MAX_NESTING` deep: deeper values would exhaust the interpreter's recursion
limit where keys are encoded (an internal error the state directory could never pass), so
they are bad lines like any other. Values keep their JSON
types exactly (``1``, ``1.0``, ``true``, ``null``, ``"1"`` stay distinct, nested arrays and
objects keep their order); JSON that Python would accept but other tools would not (``NaN``,
``Infinity``, numbers overflowing a double, lone UTF-16 surrogates) is refused.

Output, one object per emitted change: ``{"in": 3, "op": "+U", "row": [...]}`` where ``in``
is the 0-based index of the input line that caused it.

Everything here is pure (no I/O) and O(length of the line).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from upsertmat.impls.documents import json_type_name
from upsertmat.impls.settings import MAX_TIME_MS
from upsertmat.spec import Change, JsonValue, Keys, Row, RowKind


class BadLine(ValueError):
    """An input line that is neither a valid change nor a valid clock advance.

    The message says what is wrong, without the line number (the caller knows it).
    """


@dataclass(frozen=True, slots=True)
class ChangeLine:
    """A parsed change line."""

    change: Change


@dataclass(frozen=True, slots=True)
class ClockLine:
    """A parsed clock advance: ``{"time": T}``."""

    time: int


InputLine: TypeAlias = ChangeLine | ClockLine

_CHANGE_FIELDS = frozenset({"op", "row", "ts"})
_KINDS = {kind.value: kind for kind in RowKind}

MAX_NESTING = 500
"""The deepest nesting of arrays and objects a line may have (its own object and its row
count as two levels). Python's recursion limit is 1,000 frames, and the JSON encoder takes one
per level wherever a key or a record is written, below the frames of the code that calls it:
half of it leaves the rest of the program room."""


def _refuse_constant(name: str) -> Any:
    raise BadLine(f"invalid JSON: {name} is not a JSON number")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise BadLine(f"invalid JSON: the number {text} does not fit a 64-bit float")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)
_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False)


def _decode(raw: bytes | str) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadLine(f"not valid UTF-8 (byte {error.start + 1} of the line)") from None


def _load(text: str) -> object:
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as error:
        raise BadLine(f"invalid JSON: {error.msg} (column {error.colno})") from None
    except RecursionError:  # the parser met the recursion limit: far deeper than MAX_NESTING
        raise _too_deep() from None
    except BadLine:
        raise
    except ValueError as error:
        if "integer string conversion" in str(error):
            limit = sys.get_int_max_str_digits()
            raise BadLine(
                f"an integer has more than {limit} digits, the limit of this run; pass --max-int-digits N "
                "to accept longer ones (parsing time grows with the square of the digits)"
            ) from None
        raise BadLine(f"invalid JSON: {error}") from None
    if text.count("[") + text.count("{") > MAX_NESTING:  # a bound: brackets in strings count too
        _check_nesting(value)
    if "\\u" in text:  # only escapes can produce a lone surrogate
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise BadLine("a string holds a lone UTF-16 surrogate escape, which UTF-8 cannot carry") from None
    return value


def _check_nesting(value: object) -> None:
    """BadLine if ``value`` nests arrays and objects more than :data:`MAX_NESTING` deep.
    Iterative (a recursive walk would meet the limit it enforces); O(size of the value)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item if isinstance(item, list) else item.values() if isinstance(item, dict) else None
        if children is None:
            continue
        if depth > MAX_NESTING:
            raise _too_deep()
        stack.extend((child, depth + 1) for child in children)


def _too_deep() -> BadLine:
    return BadLine(
        f"arrays and objects nested more than {MAX_NESTING} deep (the line's object and its row count as "
        "two levels); such values are not accepted"
    )


def _time_value(field: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadLine(f"'{field}' must be an integer (milliseconds), got {json_type_name(value)}")
    if value < 0:
        raise BadLine(f"'{field}' must not be negative, got {value}")
    if value > MAX_TIME_MS:
        shown = str(value) if value.bit_length() <= 128 else f"an integer of {value.bit_length()} bits"
        raise BadLine(f"'{field}' must be at most {MAX_TIME_MS} ms (2**62 - 1), got {shown}")
    return value


def _quoted(names: Sequence[str]) -> str:
    return ", ".join(repr(name) for name in names)


def parse_line(raw: bytes | str) -> InputLine | None:
    """Parse one input line (without or with its line terminator); None if it is blank.

    Raises :class:`BadLine` naming what is wrong: not UTF-8, invalid JSON, not an object,
    both or neither of ``op``/``time``, unknown fields, an unknown or non-string ``op``, a
    missing or non-array ``row``, a ``ts``/``time`` that is not a non-negative integer.
    """
    text = _decode(raw)
    if text.startswith("\ufeff"):  # a byte-order mark (first line of some files)
        text = text[1:]
    if not text.strip():
        return None
    value = _load(text)
    if not isinstance(value, dict):
        raise BadLine(f"expected a JSON object, got {json_type_name(value)}")
    if "op" in value:
        if "time" in value:
            raise BadLine("a line is either a change ('op') or a clock advance ('time'), not both")
        return ChangeLine(_change(value))
    if "time" in value:
        extra = sorted(set(value) - {"time"})
        if extra:
            raise BadLine(f"unknown field(s) {_quoted(extra)} in a clock advance (it has only 'time')")
        return ClockLine(_time_value("time", value["time"]))
    fields = _quoted(list(value)) or "none"
    raise BadLine(f"expected 'op' (a change) or 'time' (a clock advance); fields found: {fields}")


def _change(value: dict[str, Any]) -> Change:
    extra = [name for name in value if name not in _CHANGE_FIELDS]
    if extra:
        raise BadLine(f"unknown field(s) {_quoted(extra)} (a change has 'op', 'row' and optional 'ts')")
    op = value["op"]
    if not isinstance(op, str):
        raise BadLine(f"'op' must be a string (one of +I, -U, +U, -D), got {json_type_name(op)}")
    kind = _KINDS.get(op)
    if kind is None:
        raise BadLine(f"unknown op {op!r} (expected one of +I, -U, +U, -D)")
    if "row" not in value:
        raise BadLine("missing 'row' (a JSON array of column values)")
    row = value["row"]
    if not isinstance(row, list):
        raise BadLine(f"'row' must be a JSON array, got {json_type_name(row)}")
    ts = value.get("ts")
    return Change(kind, tuple(row), None if ts is None else _time_value("ts", ts))


class RowShape:
    """Checks that a row carries the key columns and has the stream's arity.

    The arity (number of columns) is fixed by ``arity`` when given, otherwise by the first
    row accepted by :meth:`check`; every later row must have exactly that many columns.
    O(1) per row.
    """

    def __init__(self, keys: Keys, arity: int | None = None) -> None:
        self._columns = [("sink primary key", column) for column in keys.pk]
        self._columns += [("upsert key", column) for column in keys.upsert_key]
        self.needed = keys.max_column() + 1
        if arity is not None and arity < self.needed:
            raise ValueError(
                f"an arity of {arity} leaves out key column {keys.max_column()} (columns count from 0)"
            )
        self.arity = arity

    def check(self, row: Row) -> None:
        """Raise :class:`BadLine` if ``row`` misses a key column or has the wrong arity.

        The first row that passes fixes the arity if it is still open.
        """
        size = len(row)
        if size < self.needed:
            name, column = next((name, column) for name, column in self._columns if column >= size)
            raise BadLine(
                f"row has {size} column(s); the {name} column {column} is missing (columns count from 0)"
            )
        if self.arity is None:
            self.arity = size
        elif size != self.arity:
            raise BadLine(f"row has {size} column(s), expected {self.arity} (the stream's arity)")


def format_change(index: int, change: Change) -> str:
    """One output line (newline-terminated): ``{"in": index, "op": ..., "row": [...]}``.

    The row's values are written with their exact JSON types; non-ASCII text as is.
    """
    row = _ENCODER.encode(list(change.row))
    return f'{{"in": {index}, "op": "{change.kind.value}", "row": {row}}}\n'


def format_input_change(change: Change) -> str:
    """An input line (newline-terminated) carrying ``change``, e.g. to build test streams."""
    fields: dict[str, JsonValue] = {"op": change.kind.value, "row": list(change.row)}
    if change.ts is not None:
        fields["ts"] = change.ts
    return json.dumps(fields, ensure_ascii=False, allow_nan=False) + "\n"


def format_clock(time: int) -> str:
    """A clock-advance input line (newline-terminated)."""
    return json.dumps({"time": time}) + "\n"


def format_dead_letter(line: int, index: int, error: str, raw: bytes | str) -> str:
    """A dead-letter record (newline-terminated): the line number (1-based, in this run's input),
    the stream index ``in`` (0-based, continuing across ``--state-dir`` runs), the error and
    the raw line without its terminator (invalid UTF-8 bytes become U+FFFD)."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    text = text.rstrip("\r\n")
    record = {"line": line, "in": index, "error": error, "text": text}
    return json.dumps(record, ensure_ascii=False) + "\n"
