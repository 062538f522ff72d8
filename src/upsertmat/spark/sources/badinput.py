"""Source rows that cannot be a change: found on the executors, reported from the driver.

What is bad (docs/spark.md, "Bad input"): a line that is not JSON or whose values do not have the
declared types (Spark's corrupt record), a row without an op or with an op other than ``+I -U +U
-D``, a row without its order column or a sink primary key column, a CDC envelope that cannot be
mapped (:mod:`upsertmat.spark.sources.cdc`). Each is found before the materializer and travels through
the query as a *marked* row: its op is :data:`BAD_OP` followed by a JSON object saying where it
came from (``file`` and the raw ``text``, or a Parquet ``row`` index, or the ``line`` a CDC
parser already knows) and why (``code``). The processor passes such rows through without touching
state (``(arrival, BAD_OP, info)`` outputs); the driver takes them out of the batch
(:func:`split_bad`), finds the line of each in its file (:func:`locate`, only for batches that have
bad rows: one read of each such file) and then either fails the batch before the sink commits
(``on-error: fail``, :class:`BadInput`) or writes them to the dead-letter directory and goes on
(:class:`DeadLetters`). No pyspark import.
"""

from __future__ import annotations

import base64
import csv
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from ...impls.documents import json_type_name
from .csvlines import quote_problem
from .formats import Reader, source_format

BAD_OP = "?B"
"""The op of a row that cannot be a change; the rest of the op text (or of the output row) is
the JSON object describing it."""

ON_ERROR = ("fail", "skip")
OPS = ("+I", "-U", "+U", "-D")

# Codes the Spark side (upsertmat.spark.sources.files) writes; messages are made here.
CORRUPT = "corrupt"
NO_OP = "no-op"
UNKNOWN_OP = "unknown-op"
NO_ORDER = "no-order"
NO_KEY = "no-key"
ENVELOPE = "envelope"  # a CDC envelope the parser refused: the reason is in "reason"
INVALID_UTF8 = "utf8"  # a line (JSON Lines, CSV) that is not UTF-8: its bytes (base64) in "bytes"
UNBALANCED_QUOTE = "unbalanced-quote"  # a CSV line whose quoted field does not end on it
SCHEMA = "schema"  # a Parquet file whose column types differ from the job's


class BadInput(RuntimeError):
    """A micro-batch holds rows that cannot be changes and ``on-error`` is ``fail``: nothing of the
    batch is committed. ``rows``: every bad row of the batch, in file and line order."""

    def __init__(self, batch_id: int, rows: Sequence[BadRow]) -> None:
        first = rows[0]
        more = f" (and {len(rows) - 1} more bad row(s) in this batch)" if len(rows) > 1 else ""
        super().__init__(
            f"bad input in micro-batch {batch_id}: {first.where()}: {first.reason}{more}; nothing of this "
            "batch is committed. Fix the file in place and run the job again (it continues at this "
            "batch, exactly once), or set on-error: skip to write bad rows to the dead-letter directory"
        )
        self.batch_id = batch_id
        self.rows = tuple(rows)


@dataclass(frozen=True)
class BadRow:
    """One bad source row: its ``file`` (a local path when the source is local), its 1-based
    ``line`` (text formats; None if it could not be found again) or 0-based ``row`` index
    (Parquet), the ``reason`` and the raw ``text`` (None for Parquet). ``raw``: the line's exact
    bytes when they are not UTF-8 (``text`` then shows them escaped, :func:`shown`)."""

    file: str
    line: int | None
    row: int | None
    reason: str
    text: str | None
    raw: bytes | None = None

    def where(self) -> str:
        """``FILE line N`` / ``FILE row N`` / ``FILE``."""
        if self.line is not None:
            return f"{self.file} line {self.line}"
        if self.row is not None:
            return f"{self.file} row {self.row}"
        return self.file

    def record(self, batch_id: int) -> dict[str, Any]:
        """The dead-letter record (a JSON object)."""
        found: dict[str, Any] = {"batch": batch_id, "file": self.file}
        if self.line is not None:
            found["line"] = self.line
        if self.row is not None:
            found["row"] = self.row
        found["error"] = self.reason
        if self.text is not None:
            found["text"] = self.text
        if self.raw is not None:
            found["bytes"] = encoded(self.raw)
        return found


def marker(info: dict[str, Any]) -> str:
    """The op text of a bad row described by ``info``."""
    return BAD_OP + json.dumps(info, ensure_ascii=False, separators=(",", ":"))


def split_bad(changes: list[Any]) -> tuple[list[Any], list[dict[str, Any]]]:
    """(changes, bad row infos) of a decoded batch of ``(arrival, op, row)``: a processor's
    ``(arrival, BAD_OP, (info,))`` or a raw row whose op is a :func:`marker`. O(changes)."""
    bad: list[dict[str, Any]] = []
    kept: list[Any] = []
    for change in changes:
        op = change[1]
        if op.startswith(BAD_OP):
            text = change[2][0] if op == BAD_OP else op[len(BAD_OP) :]
            bad.append(json.loads(text))
        else:
            kept.append(change)
    return kept, bad


def local_path(uri: str) -> str:
    """A ``file:`` URI as a local path (other URIs unchanged)."""
    if uri.startswith("file:"):
        return unquote(urlparse(uri).path)
    return uri


def utf8_problem(raw: bytes) -> str | None:
    """Why the line ``raw`` is not text (None: it is valid UTF-8). The one rule of every text
    format: such a line is a bad row, never a value with U+FFFD in place of its bytes."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return f"not valid UTF-8 (byte {error.start + 1} of the line)"
    return None


def shown(raw: bytes) -> str:
    """A line's bytes as text for people: invalid bytes as backslash-x escapes (the exact bytes travel
    beside it, base64, as ``bytes``)."""
    return raw.decode("utf-8", "backslashreplace")


def encoded(raw: bytes) -> str:
    """``raw`` as base64 text (a bad row's ``bytes``)."""
    return base64.b64encode(raw).decode("ascii")


def split_lines(data: bytes) -> list[bytes]:
    """A file's lines as Spark's text reader splits them (LF, CR LF, CR)."""
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


@dataclass(frozen=True)
class SourceShape:
    """What the driver needs to explain bad rows: the format (a name of the table of formats,
    :mod:`.formats`), the data columns with their Spark types, the op / order column names and the sink
    primary key column names."""

    format: str
    types: dict[str, str]
    op_column: str
    order_column: str
    pk: tuple[str, ...]

    @property
    def reader(self) -> Reader:
        """How the format's files are read (the table's entry)."""
        return source_format(self.format).reader

    def reason(self, info: dict[str, Any]) -> str:
        """The message for one bad row's ``info``."""
        code = info.get("code")
        if code == CORRUPT:
            text = info.get("text")
            return self._corrupt(text) if isinstance(text, str) else "the row could not be read"
        if code == INVALID_UTF8:
            raw = info.get("bytes")
            problem = utf8_problem(base64.b64decode(raw)) if isinstance(raw, str) else None
            return problem or "not valid UTF-8"
        if code == UNBALANCED_QUOTE:
            text = info.get("text")
            return (quote_problem(text) if isinstance(text, str) else None) or "unbalanced quote"
        if code == NO_OP:
            return f"no op: the column {self.op_column!r} is missing or null"
        if code == UNKNOWN_OP:
            expected = ", ".join(OPS)
            return f"unknown op {info.get('op')!r} in column {self.op_column!r} (expected one of {expected})"
        if code == NO_ORDER:
            return f"no order: the column {self.order_column!r} is missing or null (an integer is needed)"
        if code == NO_KEY:
            return f"no key: the sink primary key column {info.get('column')!r} is missing or null"
        return str(info.get("reason") or code)

    def _corrupt(self, text: str) -> str:
        if self.reader is Reader.CSV:
            return self._corrupt_csv(text)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as error:
            return f"invalid JSON: {error.msg} (column {error.colno})"
        except RecursionError:
            return "invalid JSON: nested too deeply"
        if not isinstance(value, dict):
            return f"expected a JSON object, got {json_type_name(value)}"
        for name, kind in self.types.items():
            if name in value and value[name] is not None:
                problem = type_problem(kind, value[name])
                if problem:
                    return f"column {name!r} {problem}"
        return "Spark could not read the line with the declared column types"

    def _corrupt_csv(self, text: str) -> str:
        fields = next(csv.reader([text]), [])
        if len(fields) != len(self.types):
            return f"{len(fields)} field(s), expected {len(self.types)} ({', '.join(self.types)})"
        for (name, kind), field in zip(self.types.items(), fields, strict=True):
            if field == "":
                continue
            problem = text_problem(kind, field)
            if problem:
                return f"column {name!r} {problem}"
        return "Spark could not read the line with the declared column types"


INTEGER_RANGES = {"bigint": (-(2**63), 2**63 - 1), "int": (-(2**31), 2**31 - 1)}
TYPE_NAMES = {"bigint": "a long", "int": "an int", "double": "a double", "boolean": "a boolean"}


def type_problem(kind: str, value: object) -> str | None:
    """Why the JSON ``value`` cannot be a column of Spark type ``kind`` (None: it can)."""
    if kind in INTEGER_RANGES:
        low, high = INTEGER_RANGES[kind]
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be {TYPE_NAMES[kind]}, got {json_type_name(value)} ({json.dumps(value)[:40]})"
        if not low <= value <= high:
            return f"must be {TYPE_NAMES[kind]}, got {value} (out of range)"
    elif kind == "double":
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a double, got {json_type_name(value)} ({json.dumps(value)[:40]})"
    elif kind == "boolean" and not isinstance(value, bool):
        return f"must be a boolean, got {json_type_name(value)} ({json.dumps(value)[:40]})"
    return None


def text_problem(kind: str, text: str) -> str | None:
    """Why the CSV field ``text`` cannot be a column of Spark type ``kind`` (None: it can)."""
    value = text.strip()
    try:
        if kind in INTEGER_RANGES:
            number = int(value)
            low, high = INTEGER_RANGES[kind]
            if not low <= number <= high:
                return f"must be {TYPE_NAMES[kind]}, got {value} (out of range)"
        elif kind == "double":
            float(value)
        elif kind == "boolean" and value.lower() not in ("true", "false"):
            raise ValueError(value)
    except ValueError:
        return f"must be {TYPE_NAMES[kind]}, got {value[:40]!r}"
    return None


def _lines(path: str) -> list[bytes]:
    """The lines of a text file as Spark's text reader splits them (LF, CR LF, CR), as bytes."""
    with open(path, "rb") as handle:
        return split_lines(handle.read())


def locate(infos: Iterable[dict[str, Any]], shape: SourceShape) -> list[BadRow]:
    """The bad rows of ``infos`` with their lines found again in their files, sorted by file and
    position. Reads each file that has bad rows once (O(its size)); rows whose line cannot be
    found (the file changed or went away) keep ``line`` None."""
    by_file: dict[str, list[dict[str, Any]]] = {}
    for info in infos:
        by_file.setdefault(local_path(str(info.get("file", "?"))), []).append(info)
    found: list[BadRow] = []
    for file, items in sorted(by_file.items()):
        lines: list[bytes] | None = None
        taken: set[int] = set()
        for info in items:
            line = info.get("line")
            if line is None and "row" not in info and shape.reader in (Reader.LINES, Reader.CSV):
                if lines is None:
                    try:
                        lines = _lines(file) if os.path.exists(file) else []
                    except OSError:
                        lines = []
                line = _find_line(lines, info, shape, taken)
            text = info.get("text")
            raw = base64.b64decode(info["bytes"]) if isinstance(info.get("bytes"), str) else None
            found.append(
                BadRow(
                    file=file,
                    line=None if line is None else int(line),
                    row=None if info.get("row") is None else int(info["row"]),
                    reason=shape.reason(info),
                    text=shown(raw) if raw is not None else None if text is None else str(text),
                    raw=raw if raw is not None and utf8_problem(raw) else None,
                )
            )
    found.sort(key=lambda bad: (bad.file, bad.line or 0, bad.row or 0))
    return found


def _find_line(lines: list[bytes], info: dict[str, Any], shape: SourceShape, taken: set[int]) -> int | None:
    """The first line not yet taken that holds the bad row (by its bytes, or its raw text, or
    for a CSV row read without a raw text by its op and order fields); 1-based."""
    text = info.get("text")
    raw = base64.b64decode(info["bytes"]) if isinstance(info.get("bytes"), str) else None
    for index, line in enumerate(lines):
        if index in taken:
            continue
        if raw is not None:
            hit = line == raw
        elif isinstance(text, str):
            hit = line.decode("utf-8", "replace") == text
        elif shape.reader is Reader.CSV:
            hit = _csv_match(line.decode("utf-8", "replace"), info, shape)
        else:
            hit = False
        if hit:
            taken.add(index)
            return index + 1
    return None


def _csv_match(line: str, info: dict[str, Any], shape: SourceShape) -> bool:
    names = list(shape.types)
    fields = next(csv.reader([line]), [])
    if len(fields) != len(names):
        return False
    record = dict(zip(names, fields, strict=True))
    for column, key in ((shape.op_column, "op"), (shape.order_column, "order")):
        want = info.get(key)
        got = record.get(column, "").strip()
        if (want is None and got != "") or (want is not None and got != str(want)):
            return False
    return True


class DeadLetters:
    """The dead-letter directory of ``on-error: skip``: one JSON Lines file per micro-batch that
    had bad rows, ``batch-<id>.jsonl``, each line a :meth:`BadRow.record` (``batch``, ``file``,
    ``line`` or ``row``, ``error``, ``text``).

    Written before the sink commits the batch, atomically (a temporary file renamed into place,
    fsynced): a batch that runs again after a crash rewrites the same file with the same
    records (its rows sorted by file and line), so every bad row is there exactly once whatever
    happened. O(bad rows) per batch.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, batch_id: int) -> Path:
        """The file of ``batch_id``."""
        return self.directory / f"batch-{batch_id:08d}.jsonl"

    def write(self, batch_id: int, rows: Sequence[BadRow]) -> Path:
        """Write ``rows`` as batch ``batch_id``'s file (replacing one a crashed run wrote)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        target = self.path(batch_id)
        staged = target.with_suffix(".tmp")
        text = "".join(
            json.dumps(row.record(batch_id), ensure_ascii=False, allow_nan=False) + "\n" for row in rows
        )
        with staged.open("w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        staged.replace(target)
        return target
