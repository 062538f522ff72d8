"""CDC source formats: Debezium, Canal and Maxwell JSON envelopes mapped to ``+I -U +U -D``.

Each line of a file is one envelope (a JSON object); it becomes zero, one or two changes (Canal:
one or two per row of its ``data`` array), mapped as Flink maps them (formats ``debezium-json``,
``canal-json``, ``maxwell-json``):

- **Debezium**: ``op`` ``c`` (create) and ``r`` (snapshot read) -> ``+I after``; ``u`` -> ``-U
  before``, ``+U after``; ``d`` -> ``-D before``. A schema-wrapped envelope (``{"schema": ...,
  "payload": {...}}``, Kafka Connect's JSON converter with schemas) is unwrapped; a tombstone
  (the line ``null``, what Kafka's delete marker becomes in a file) is skipped. ``u`` or ``d``
  without ``before`` is bad input (PostgreSQL needs ``REPLICA IDENTITY FULL``).
- **Canal**: ``type`` ``INSERT`` -> ``+I`` per row of ``data``; ``UPDATE`` -> per row ``-U``
  (the row with the fields of the matching ``old`` entry put back) then ``+U`` (the row);
  ``DELETE`` -> ``-D`` per row. DDL (``isDdl: true``, or a type such as ``CREATE``) is skipped.
- **Maxwell**: ``type`` ``insert`` -> ``+I data``; ``update`` -> ``-U`` (``data`` with the fields
  of ``old`` put back), ``+U data``; ``delete`` -> ``-D data``.

Values are read into the job's column types as Flink's JSON format reads them: a JSON number or a
numeric string (Canal writes every value as a string) for ``long``/``int``/``double``, a JSON
boolean or ``"true"``/``"false"`` for ``boolean`` (any other string is refused rather than read
as false), any scalar's text for ``string``; a missing field is null. A fraction for an integer
column, a number out of range, or an unparsable string is bad input.

**Order.** The order of a CDC log is the order of its lines (none of the formats carries a
unique sequence: ``ts_ms``, ``es`` and ``ts`` are milliseconds or seconds, and Canal's ``id`` is
per message), so a change's arrival is its position: ``line << 16 | index`` (its index among
the changes of its envelope). That orders the changes of one file; files are ordered by Spark's
file source (modification time), one file per micro-batch.

Malformed envelopes (not JSON, not an object, an unknown op or type, a missing image, a value of
the wrong type, a missing key column) become bad rows (:mod:`upsertmat.spark.sources.badinput`) carrying
their file, line and reason. No pyspark import; :func:`parse_files` runs in ``mapInArrow``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ...impls.documents import json_type_name
from .badinput import BAD_OP, ENVELOPE, encoded, local_path, shown, split_lines, utf8_problem
from .formats import SourceFormat, source_format

MAX_INDEX = 1 << 16
ARROW_TYPES = {"bigint": "int64", "int": "int32", "double": "float64", "boolean": "bool", "string": "string"}
_RANGES = {"bigint": (-(2**63), 2**63 - 1), "int": (-(2**31), 2**31 - 1)}
_CANAL_DDL = frozenset({"CREATE", "ALTER", "ERASE", "QUERY", "TRUNCATE", "RENAME", "CINDEX", "DINDEX"})


class EnvelopeError(ValueError):
    """An envelope that cannot be mapped to changes; the message says why (no position)."""


@dataclass(frozen=True)
class CdcSpec:
    """What the parser produces: ``format`` (the name of a CDC format of the table), the row's ``columns`` as
    ``(name, Spark simple type)`` pairs, the op and arrival column names of the output and the
    sink primary key columns (a change without one is bad input)."""

    format: str
    columns: tuple[tuple[str, str], ...]
    op_column: str
    arrival_column: str
    pk: tuple[str, ...]

    def output_ddl(self) -> str:
        """The DDL of the parsed rows: op, arrival, then the columns."""
        fields = [f"`{self.op_column}` STRING", f"`{self.arrival_column}` BIGINT"]
        fields += [f"`{name}` {kind.upper()}" for name, kind in self.columns]
        return ", ".join(fields)


def envelope_changes(fmt: str, envelope: Any) -> list[tuple[str, dict[str, Any]]]:
    """The changes ``(op, row object)`` of one parsed envelope, in order ([] for a tombstone or
    DDL). EnvelopeError naming the field that is wrong."""
    mapping = MAPPINGS.get(source_format(fmt))
    if mapping is None:
        raise ValueError(f"{fmt!r} is not a CDC format")
    return mapping(envelope)


def _image(envelope: dict[str, Any], name: str, why: str) -> dict[str, Any]:
    value = envelope.get(name)
    if not isinstance(value, dict):
        got = "missing" if name not in envelope else json_type_name(value)
        raise EnvelopeError(f"'{name}' must be an object ({why}), got {got}")
    return value


def _debezium(envelope: Any) -> list[tuple[str, dict[str, Any]]]:
    if envelope is None:
        return []  # a tombstone
    if not isinstance(envelope, dict):
        raise EnvelopeError(f"expected a JSON object (a Debezium envelope), got {json_type_name(envelope)}")
    if "payload" in envelope and "schema" in envelope:
        envelope = envelope["payload"]
        if envelope is None:
            return []
        if not isinstance(envelope, dict):
            raise EnvelopeError(f"'payload' must be an object, got {json_type_name(envelope)}")
    op = envelope.get("op")
    if op in ("c", "r"):
        return [("+I", _image(envelope, "after", f"op {op!r}"))]
    if op == "u":
        before = _image(envelope, "before", "op 'u'; PostgreSQL needs REPLICA IDENTITY FULL")
        return [("-U", before), ("+U", _image(envelope, "after", "op 'u'"))]
    if op == "d":
        return [("-D", _image(envelope, "before", "op 'd'; PostgreSQL needs REPLICA IDENTITY FULL"))]
    if "op" not in envelope:
        raise EnvelopeError("no 'op' field (a Debezium envelope has op c, r, u or d)")
    raise EnvelopeError(f"unknown Debezium op {op!r} (expected c, r, u or d)")


def _rows(envelope: dict[str, Any], name: str) -> list[dict[str, Any]]:
    value = envelope.get(name)
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        got = "missing" if name not in envelope else json_type_name(value)
        raise EnvelopeError(f"'{name}' must be an array of objects, got {got}")
    return value


def _canal(envelope: Any) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(envelope, dict):
        raise EnvelopeError(f"expected a JSON object (a Canal message), got {json_type_name(envelope)}")
    kind = envelope.get("type")
    if envelope.get("isDdl") is True or kind in _CANAL_DDL:
        return []
    if kind == "INSERT":
        return [("+I", row) for row in _rows(envelope, "data")]
    if kind == "DELETE":
        return [("-D", row) for row in _rows(envelope, "data")]
    if kind == "UPDATE":
        rows, old = _rows(envelope, "data"), _rows(envelope, "old")
        if len(old) != len(rows):
            raise EnvelopeError(f"'old' has {len(old)} entries, 'data' {len(rows)} (one per updated row)")
        changes: list[tuple[str, dict[str, Any]]] = []
        for row, before in zip(rows, old, strict=True):
            changes += [("-U", {**row, **before}), ("+U", row)]
        return changes
    if "type" not in envelope:
        raise EnvelopeError("no 'type' field (a Canal message has type INSERT, UPDATE or DELETE)")
    raise EnvelopeError(f"unknown Canal type {kind!r} (expected INSERT, UPDATE or DELETE)")


def _maxwell(envelope: Any) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(envelope, dict):
        raise EnvelopeError(f"expected a JSON object (a Maxwell message), got {json_type_name(envelope)}")
    kind = envelope.get("type")
    if kind == "insert":
        return [("+I", _image(envelope, "data", "type 'insert'"))]
    if kind == "delete":
        return [("-D", _image(envelope, "data", "type 'delete'"))]
    if kind == "update":
        row = _image(envelope, "data", "type 'update'")
        old = envelope.get("old") or {}
        if not isinstance(old, dict):
            raise EnvelopeError(f"'old' must be an object, got {json_type_name(old)}")
        return [("-U", {**row, **old}), ("+U", row)]
    if "type" not in envelope:
        raise EnvelopeError("no 'type' field (a Maxwell message has type insert, update or delete)")
    raise EnvelopeError(f"unknown Maxwell type {kind!r} (expected insert, update or delete)")


MAPPINGS: dict[SourceFormat, Callable[[Any], list[tuple[str, dict[str, Any]]]]] = {
    SourceFormat.DEBEZIUM: _debezium,
    SourceFormat.CANAL: _canal,
    SourceFormat.MAXWELL: _maxwell,
}
"""Each CDC format of the table -> its envelope mapping."""


def convert(kind: str, value: Any) -> Any:
    """``value`` (a JSON value) as a column of Spark type ``kind``; EnvelopeError if it cannot be."""
    if value is None:
        return None
    if kind in _RANGES:
        if isinstance(value, bool):
            raise EnvelopeError(f"a boolean for an integer column: {value}")
        if isinstance(value, float):
            if not value.is_integer():
                raise EnvelopeError(f"a fraction for an integer column: {value}")
            value = int(value)
        elif isinstance(value, str):
            text = value.strip()
            if not text.lstrip("+-").isdigit():
                raise EnvelopeError(f"not an integer: {value[:40]!r}")
            value = int(text)
        elif not isinstance(value, int):
            raise EnvelopeError(f"{json_type_name(value)} for an integer column")
        low, high = _RANGES[kind]
        if not low <= value <= high:
            raise EnvelopeError(f"{value} is out of range for a {'long' if kind == 'bigint' else 'int'}")
        return value
    if kind == "double":
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise EnvelopeError(f"{json_type_name(value)} for a double column")
        try:
            number = float(value.strip()) if isinstance(value, str) else float(value)
        except (ValueError, OverflowError):
            raise EnvelopeError(f"not a number: {str(value)[:40]!r}") from None
        if isinstance(value, int) and not isinstance(value, bool) and math.isinf(number):
            raise EnvelopeError(f"{value} does not fit a double")
        return number
    if kind == "boolean":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise EnvelopeError(f"not a boolean: {json.dumps(value)[:40]}")
    if isinstance(value, str):
        return value
    return (
        json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if isinstance(value, dict | list)
        else (json.dumps(value))
    )


def file_records(spec: CdcSpec, file: str, data: bytes | str) -> list[tuple[Any, ...]]:
    """The parsed records ``(op, arrival, *columns)`` of one file, in line order. A bad line is
    one record whose op is a bad-row marker and whose other values are null. O(file size)."""
    width = len(spec.columns)
    names = [name for name, _ in spec.columns]
    kinds = [kind for _, kind in spec.columns]
    key_positions = [names.index(name) for name in spec.pk]
    path = local_path(file)
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    records: list[tuple[Any, ...]] = []
    for number, raw in enumerate(split_lines(data), start=1):
        problem = utf8_problem(raw)
        if problem is not None:  # the rule of every text format: a bad row, its bytes kept
            records.append(_bad(path, number, shown(raw), problem, width, raw))
            continue
        text = raw.decode("utf-8")
        if text.startswith("\ufeff"):
            text = text[1:]
        if not text.strip():
            continue
        try:
            envelope = json.loads(text)
        except json.JSONDecodeError as error:
            records.append(
                _bad(path, number, text, f"invalid JSON: {error.msg} (column {error.colno})", width)
            )
            continue
        except RecursionError:
            records.append(_bad(path, number, text, "invalid JSON: nested too deeply", width))
            continue
        try:
            changes = envelope_changes(spec.format, envelope)
            if len(changes) >= MAX_INDEX:
                raise EnvelopeError(f"{len(changes)} changes in one envelope (at most {MAX_INDEX - 1})")
            rows = []
            for index, (op, image) in enumerate(changes):
                values = []
                for name, kind in zip(names, kinds, strict=True):
                    try:
                        values.append(convert(kind, image.get(name)))
                    except EnvelopeError as error:
                        raise EnvelopeError(f"column {name!r}: {error}") from None
                for position in key_positions:
                    if values[position] is None:
                        raise EnvelopeError(
                            f"the sink primary key column {names[position]!r} is missing or null in the "
                            f"{'before' if op in ('-U', '-D') else 'after'} image"
                        )
                rows.append((op, (number << 16) | index, *values))
        except EnvelopeError as error:
            records.append(_bad(path, number, text, str(error), width))
            continue
        records.extend(rows)
    return records


def _bad(
    file: str, line: int, text: str, reason: str, width: int, raw: bytes | None = None
) -> tuple[Any, ...]:
    info: dict[str, Any] = {"code": ENVELOPE, "file": file, "line": line, "reason": reason, "text": text}
    if raw is not None:
        info["bytes"] = encoded(raw)
    return (
        BAD_OP + json.dumps(info, ensure_ascii=False, separators=(",", ":")),
        line << 16,
        *([None] * width),
    )


def parse_files(spec: CdcSpec, batches: Iterator[Any]) -> Iterator[Any]:
    """``mapInArrow`` function over whole files (``path``, ``content``: Spark's text source with
    ``wholetext``, the content as bytes: Spark's decoding would put U+FFFD for a byte that is not
    UTF-8, and Arrow's would raise): the records of each file (:func:`file_records`) as Arrow
    batches of the spec's output schema."""
    import pyarrow as pa  # type: ignore[import-untyped]  # only in the Python workers

    schema = pa.schema(
        [(spec.op_column, pa.string()), (spec.arrival_column, pa.int64())]
        + [(name, pa.type_for_alias(ARROW_TYPES[kind])) for name, kind in spec.columns]
    )
    for batch in batches:
        paths = batch.column("path").to_pylist()
        contents = batch.column("content").to_pylist()
        for path, content in zip(paths, contents, strict=True):
            records = file_records(spec, path, content or b"")
            if not records:
                continue
            columns = list(zip(*records, strict=True))
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(list(column), type=field.type)
                    for column, field in zip(columns, schema, strict=True)
                ],
                schema=schema,
            )
