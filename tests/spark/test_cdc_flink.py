"""The CDC formats against Apache Flink 2.3's own ``debezium-json``, ``canal-json`` and
``maxwell-json`` (the ``flink`` extra; ``tox -e flink``).

The pipeline maps each envelope "as Flink maps it" (upsertmat.spark.sources.cdc). Here every envelope of
one corpus (inserts, updates, deletes, nulls, before-less updates, Canal's multi-row ``data``,
Maxwell's ``old``, tombstones, DDL, op codes, values of every column type, malformed lines) goes
through both: ours is :func:`upsertmat.spark.sources.cdc.file_records`, what the pipeline's Spark
workers run on each file; Flink's is a real job in PyFlink's JVM, a ``filesystem`` source with
the format (Flink's default options unless a case names one) read into the same columns, each
change printed as its kind and a ``JSON_ARRAY`` of its values. For each envelope the outcome must
be equal: the same changes (kind and every value, typed), or both refusing it (Flink fails the
job, ours makes it a bad row). Where they differ the case is ``xfail(strict=True)`` and its
reason says exactly how; the mapping is not changed here.

One job per format runs the whole corpus, a marker envelope after each line (the outputs
between two markers are the line's: parallelism 1 keeps the order), all in one JVM and one kept
MiniCluster. A refused envelope fails the job: the envelope Flink's error quotes is recorded as
refused and the job runs again without it, so a format costs one job plus one per refusal.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from upsertmat.spark.sources.badinput import BAD_OP
from upsertmat.spark.sources.cdc import CdcSpec, file_records

from ..flinkextra import require_pyflink

pytestmark = [pytest.mark.slow, pytest.mark.flink]

COLUMNS = (
    ("id", "bigint"),
    ("name", "string"),
    ("level", "int"),
    ("score", "double"),
    ("active", "boolean"),
    ("note", "string"),
)
FLINK_TYPES = {"bigint": "BIGINT", "int": "INT", "double": "DOUBLE", "boolean": "BOOLEAN", "string": "STRING"}
MARKER_ID = 9_000_000_000


@dataclass(frozen=True)
class Envelope:
    """One line of the corpus: its id, format, text, Flink format options beyond the defaults,
    and, when ours and Flink's outcomes differ, how (the case is then an expected failure)."""

    name: str
    format: str
    line: str
    options: tuple[tuple[str, str], ...] = ()
    differs: str = ""


def _j(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


ANN = {"id": 1, "name": "ann", "level": 3, "score": 1.5, "active": True, "note": "first"}
ANN2 = {**ANN, "name": "anne", "level": 4}
BOB = {"id": 2, "name": "bob", "level": 7, "score": -0.25, "active": False, "note": None}
WRAPPED = (("debezium-json.schema-include", "true"),)
SCHEMA = {"type": "struct", "name": "demo.users.Envelope", "optional": False, "fields": []}


def debezium(op: str, before: Any = None, after: Any = None, **extra: Any) -> str:
    return _j({"before": before, "after": after, "op": op, **extra})


def canal(kind: str, data: Any, old: Any = None, **extra: Any) -> str:
    fields = {"data": data, "database": "demo", "table": "users", "pkNames": ["id"], "isDdl": False}
    return _j({**fields, "type": kind, "es": 1_700_000_000_000, "ts": 1_700_000_000_100, "old": old, **extra})


def maxwell(kind: str, data: Any, **extra: Any) -> str:
    return _j(
        {"database": "demo", "table": "users", "type": kind, "ts": 1_700_000_000, "data": data, **extra}
    )


def strings(row: dict[str, Any]) -> dict[str, Any]:
    """A row as Canal writes it: every value a string (JSON text for booleans)."""
    return {
        k: None if v is None else (str(v).lower() if isinstance(v, bool) else str(v)) for k, v in row.items()
    }


NO_KEY = (
    "ours refuses the envelope (the sink primary key column 'id' is null: a bad row); Flink's "
    "format emits the change with a null id and leaves it to the sink's NOT NULL check"
)
CORPUS = [
    # Debezium: op codes, images, envelopes
    Envelope("dbz-create", "debezium-json", debezium("c", after=ANN)),
    Envelope("dbz-snapshot-read", "debezium-json", debezium("r", after=ANN)),
    Envelope("dbz-create-with-before", "debezium-json", debezium("c", before=BOB, after=ANN)),
    Envelope("dbz-update", "debezium-json", debezium("u", before=ANN, after=ANN2)),
    Envelope("dbz-delete", "debezium-json", debezium("d", before=ANN)),
    Envelope("dbz-delete-with-after", "debezium-json", debezium("d", before=ANN, after=ANN2)),
    Envelope(
        "dbz-metadata",
        "debezium-json",
        debezium(
            "u",
            before=BOB,
            after={**BOB, "extra": [1]},
            source={"connector": "mysql", "db": "demo", "table": "users", "pos": 4},
            ts_ms=1_700_000_000_000,
            transaction=None,
        ),
    ),
    Envelope("dbz-nulls-and-missing", "debezium-json", debezium("c", after={"id": 3, "name": None})),
    Envelope("dbz-update-without-before", "debezium-json", debezium("u", after=ANN2)),
    Envelope("dbz-delete-without-before", "debezium-json", debezium("d")),
    Envelope("dbz-create-without-after", "debezium-json", debezium("c")),
    Envelope("dbz-truncate-op", "debezium-json", debezium("t")),
    Envelope("dbz-message-op", "debezium-json", debezium("m")),
    Envelope("dbz-no-op", "debezium-json", _j({"before": None, "after": ANN})),
    Envelope("dbz-not-an-object", "debezium-json", "[1, 2]"),
    Envelope("dbz-invalid-json", "debezium-json", '{"op": "c", "after": {"id": 1}'),
    Envelope("dbz-blank-line", "debezium-json", ""),
    Envelope(
        "dbz-tombstone-line",
        "debezium-json",
        "null",
        differs="ours skips the line 'null' as a tombstone; Flink refuses it (NullPointerException: "
        "'payload' is null, 'Corrupt Debezium JSON message'): Flink skips only an empty message",
    ),
    Envelope("dbz-null-key", "debezium-json", debezium("c", after={**ANN, "id": None}), differs=NO_KEY),
    # Kafka Connect's schema envelope: Flink reads it with debezium-json.schema-include = true
    Envelope(
        "dbz-wrapped-create",
        "debezium-json",
        _j({"schema": SCHEMA, "payload": {"op": "c", "after": ANN}}),
        WRAPPED,
    ),
    Envelope(
        "dbz-wrapped-update",
        "debezium-json",
        _j({"schema": SCHEMA, "payload": {"op": "u", "before": ANN, "after": ANN2}}),
        WRAPPED,
    ),
    Envelope(
        "dbz-wrapped-tombstone",
        "debezium-json",
        _j({"schema": None, "payload": None}),
        WRAPPED,
        differs="ours skips a schema envelope whose payload is null; Flink (schema-include = true) "
        "refuses it (NullPointerException: 'payload' is null)",
    ),
    Envelope(
        "dbz-wrapped-under-default-options",
        "debezium-json",
        _j({"schema": SCHEMA, "payload": {"op": "c", "after": ANN}}),
        differs="ours unwraps a schema envelope whatever the options; Flink's debezium-json reads "
        "one only with debezium-json.schema-include = true and refuses it by default (no 'op')",
    ),
    # values read into the column types (one JSON reader serves all three Flink formats)
    Envelope(
        "value-strings-for-numbers",
        "debezium-json",
        debezium("c", after={"id": "7", "level": " 8 ", "score": "2.5", "active": "true"}),
    ),
    Envelope("value-plus-sign", "debezium-json", debezium("c", after={"id": "+9", "level": "+5"})),
    Envelope("value-integral-float-for-bigint", "debezium-json", debezium("c", after={"id": 7.0})),
    Envelope(
        "value-fraction-for-bigint",
        "debezium-json",
        debezium("c", after={"id": 7.5}),
        differs="Flink reads 7.5 into a BIGINT as 7 (Jackson's asLong truncates); ours refuses the "
        "envelope (column 'id': a fraction for an integer column)",
    ),
    Envelope("value-exponent-string-for-bigint", "debezium-json", debezium("c", after={"id": "1e3"})),
    Envelope(
        "value-sign-garbage-for-bigint",
        "debezium-json",
        debezium("c", after={"id": "+-5"}),
        differs="Flink refuses the envelope (NumberFormatException); ours raises ValueError out of "
        "file_records (convert strips every leading sign before isdigit, then int('+-5') fails): "
        "an uncaught error, not a bad row",
    ),
    Envelope("value-int-out-of-range", "debezium-json", debezium("c", after={"id": 1, "level": 2**31})),
    Envelope("value-bigint-out-of-range", "debezium-json", debezium("c", after={"id": 2**63})),
    Envelope("value-int-for-double", "debezium-json", debezium("c", after={"id": 1, "score": 2})),
    Envelope("value-big-int-for-double", "debezium-json", debezium("c", after={"id": 1, "score": 2**64})),
    Envelope("value-nan-string", "debezium-json", debezium("c", after={"id": 1, "score": "NaN"})),
    Envelope(
        "value-inf-string",
        "debezium-json",
        debezium("c", after={"id": 1, "score": "inf"}),
        differs="ours reads 'inf' into a DOUBLE as infinity (Python's float); Flink refuses the "
        "envelope (Java's Double.parseDouble accepts only 'Infinity')",
    ),
    Envelope("value-boolean-upper-case", "debezium-json", debezium("c", after={"id": 1, "active": "TRUE"})),
    Envelope("value-boolean-padded", "debezium-json", debezium("c", after={"id": 1, "active": " false "})),
    Envelope(
        "value-boolean-other-string",
        "debezium-json",
        debezium("c", after={"id": 1, "active": "yes"}),
        differs="Flink reads 'yes' into a BOOLEAN as false (Boolean.parseBoolean); ours refuses the "
        "envelope (column 'active': not a boolean), on purpose (docs/spark.md)",
    ),
    Envelope(
        "value-number-for-boolean",
        "debezium-json",
        debezium("c", after={"id": 1, "active": 1}),
        differs="Flink reads 1 into a BOOLEAN as false (Boolean.parseBoolean of its text); ours "
        "refuses the envelope (column 'active': not a boolean)",
    ),
    Envelope("value-number-for-string", "debezium-json", debezium("c", after={"id": 1, "name": 5})),
    Envelope("value-fraction-for-string", "debezium-json", debezium("c", after={"id": 1, "name": 1.5})),
    Envelope(
        "value-exponent-for-string",
        "debezium-json",
        debezium("c", after={"id": 1, "name": 1e20}),
        differs="a JSON number read into a STRING column keeps its text differently: Flink writes "
        "1e20 as '1.0E20' (Java's Double.toString), ours as '1e+20' (Python's repr)",
    ),
    Envelope("value-boolean-for-string", "debezium-json", debezium("c", after={"id": 1, "name": True})),
    Envelope(
        "value-object-for-string",
        "debezium-json",
        debezium("c", after={"id": 1, "note": {"a": [1, {"b": None}], "c": "\u00e9"}}),
    ),
    # Canal: multi-row data, old, DDL, values as strings
    Envelope("canal-insert", "canal-json", canal("INSERT", [strings(ANN)])),
    Envelope("canal-insert-rows", "canal-json", canal("INSERT", [strings(ANN), strings(BOB), {"id": "3"}])),
    Envelope("canal-insert-typed-values", "canal-json", canal("INSERT", [ANN])),
    Envelope("canal-insert-no-rows", "canal-json", canal("INSERT", [])),
    Envelope(
        "canal-update",
        "canal-json",
        canal("UPDATE", [strings(ANN2)], [{"name": "ann", "level": "3"}], mysqlType={"id": "bigint"}),
    ),
    Envelope("canal-update-key", "canal-json", canal("UPDATE", [strings({**ANN, "id": 5})], [{"id": "1"}])),
    Envelope("canal-update-old-null", "canal-json", canal("UPDATE", [strings(ANN)], [{"note": None}])),
    Envelope(
        "canal-update-rows-alike",
        "canal-json",
        canal("UPDATE", [strings(ANN2), strings({**BOB, "name": "bo"})], [{"name": "ann"}, {"name": "bob"}]),
    ),
    Envelope(
        "canal-update-rows-differing-old",
        "canal-json",
        canal("UPDATE", [strings(ANN2), strings({**BOB, "level": 8})], [{"name": "ann"}, {"level": "7"}]),
        differs="a multi-row UPDATE whose 'old' entries name different columns: Flink looks a "
        "column up in the whole 'old' array (JsonNode.findValue), so row 1's -U keeps level null "
        "(named only in row 2's old) and row 2's -U keeps name null; ours takes each row's own "
        "old entry: -U[1, 'ann', 4, ...] and -U[2, 'bob', 7, ...]",
    ),
    Envelope("canal-update-without-old", "canal-json", canal("UPDATE", [strings(ANN2)])),
    Envelope("canal-update-old-shorter", "canal-json", canal("UPDATE", [strings(ANN2), strings(BOB)], [{}])),
    Envelope("canal-delete-rows", "canal-json", canal("DELETE", [strings(ANN), strings(BOB)])),
    Envelope(
        "canal-ddl-create", "canal-json", canal("CREATE", None, isDdl=True, sql="CREATE TABLE users (...)")
    ),
    Envelope(
        "canal-ddl-alter",
        "canal-json",
        canal("ALTER", None, isDdl=True, sql="ALTER TABLE users ADD note TEXT"),
        differs="ours skips every DDL message (isDdl true, or type CREATE, ALTER, ERASE, QUERY, "
        "TRUNCATE, RENAME, CINDEX, DINDEX); Flink skips only type CREATE and refuses the others "
        '(Unknown "type" value "ALTER")',
    ),
    Envelope(
        "canal-query",
        "canal-json",
        canal("QUERY", None, sql="SELECT 1"),
        differs='ours skips type QUERY as DDL; Flink refuses it (Unknown "type" value "QUERY")',
    ),
    Envelope("canal-unknown-type", "canal-json", canal("UPSERT", [strings(ANN)])),
    Envelope("canal-data-null", "canal-json", canal("INSERT", None)),
    Envelope("canal-no-type", "canal-json", _j({"data": [strings(ANN)]})),
    Envelope("canal-blank-line", "canal-json", ""),
    # Maxwell: old, op types
    Envelope("maxwell-insert", "maxwell-json", maxwell("insert", ANN, xid=100, commit=True)),
    Envelope("maxwell-update", "maxwell-json", maxwell("update", ANN2, old={"name": "ann", "level": 3})),
    Envelope("maxwell-update-key", "maxwell-json", maxwell("update", {**ANN, "id": 5}, old={"id": 1})),
    Envelope("maxwell-update-old-empty", "maxwell-json", maxwell("update", ANN2, old={})),
    Envelope("maxwell-update-old-null", "maxwell-json", maxwell("update", ANN, old={"note": None})),
    Envelope(
        "maxwell-update-without-old",
        "maxwell-json",
        maxwell("update", ANN2),
        differs="an update without 'old': ours emits -U and +U of 'data' (nothing changed back); "
        "Flink refuses it (NullPointerException: 'before' is null)",
    ),
    Envelope(
        "maxwell-update-old-nested",
        "maxwell-json",
        maxwell("update", {**ANN, "note": "plain"}, old={"note": {"id": 5}}),
        differs="'old' holds an object whose field is named like a column: Flink looks columns up "
        "with JsonNode.findValue, which searches nested objects too, so its -U has id null (found "
        "inside old.note); ours takes only old's own fields: -U[1, 'ann', ..., '{\"id\":5}']",
    ),
    Envelope("maxwell-delete", "maxwell-json", maxwell("delete", BOB)),
    Envelope("maxwell-bootstrap-insert", "maxwell-json", maxwell("bootstrap-insert", ANN)),
    Envelope("maxwell-ddl", "maxwell-json", maxwell("table-create", None, sql="CREATE TABLE users (...)")),
    Envelope("maxwell-data-null", "maxwell-json", maxwell("insert", None)),
    Envelope("maxwell-no-type", "maxwell-json", _j({"data": ANN})),
    Envelope("maxwell-blank-line", "maxwell-json", ""),
]


def marker(fmt: str, options: tuple[tuple[str, str], ...], number: int) -> str:
    """An insert envelope of ``fmt`` on a key no case uses; its output ends case ``number``'s."""
    row = {"id": MARKER_ID + number, "name": "marker"}
    if fmt == "canal-json":
        return canal("INSERT", [strings(row)])
    if fmt == "maxwell-json":
        return maxwell("insert", row)
    if options == WRAPPED:
        return _j({"schema": SCHEMA, "payload": {"op": "c", "after": row}})
    return debezium("c", after=row)


Outcome = tuple[str, Any]
"""``("changes", [(kind, [values])])``, ``("refused", why)`` or ``("crashed", the error)``."""


def comparable(outcome: Outcome) -> tuple[str, str]:
    """What must be equal: the tag, and for changes their exact JSON (NaN included)."""
    kind, detail = outcome
    return (kind, json.dumps(detail) if kind == "changes" else "")


def typed(values: list[Any]) -> list[Any]:
    """Flink's JSON_ARRAY of a row back to the column types (it writes NaN and infinities of
    a DOUBLE as strings)."""
    result = []
    for (_, kind), value in zip(COLUMNS, values, strict=True):
        if kind == "double" and isinstance(value, str | int):
            value = float(value)
        result.append(value)
    return result


class FlinkFormats:
    """Runs corpus lines through Flink's formats, in one JVM and one kept MiniCluster."""

    def __init__(self, directory: Path) -> None:
        from upsertmat.conformance.tools.flink import LocalCluster, environments

        self.directory = directory
        self.cluster = LocalCluster()
        self.env, self.tables = environments({})
        self.tables.get_config().set("table.exec.sink.upsert-materialize", "NONE")
        self.jobs = 0

    def outcomes(self, group: list[Envelope]) -> dict[str, Outcome]:
        """Each envelope's outcome under Flink (``group``: one format and its options, each
        line once). A refused envelope fails the job, and the source reads lines in batches,
        so what was printed before the failure is not complete: the envelope Flink names in
        its error is recorded as refused and the job runs again without it."""
        from upsertmat.conformance.tools.flink import FlinkJobError

        assert len({envelope.line for envelope in group}) == len(group), "a line twice in one format"
        found: dict[str, Outcome] = {}
        pending = list(group)
        while pending:
            lines = []
            for number, envelope in enumerate(pending):
                lines += [envelope.line, marker(envelope.format, envelope.options, number)]
            try:
                text = self._job(group[0], lines)
            except FlinkJobError as failure:
                refused = self._refused(pending, str(failure))
                causes = [line for line in str(failure).splitlines() if line.startswith("Caused by:")]
                found[refused.name] = ("refused", causes[-1])
                pending.remove(refused)
                continue
            position, changes = 0, list[tuple[str, list[Any]]]()
            for line in text.splitlines():
                kind, values = line[:2], json.loads(line[3:-1])
                if values[0] is not None and values[0] >= MARKER_ID and values[1] == "marker":
                    assert values[0] == MARKER_ID + position, f"marker {values[0]} after case {position}"
                    found[pending[position].name] = ("changes", changes)
                    position, changes = position + 1, []
                else:
                    changes.append((kind, typed(values)))
            assert position == len(pending), f"{len(pending) - position} case(s) without their marker"
            pending = []
        return found

    @staticmethod
    def _refused(pending: list[Envelope], trace: str) -> Envelope:
        """The envelope a failed job's trace quotes (Flink's formats wrap every error in
        ``Corrupt ... JSON message '<the line>'``)."""
        quoted = re.search(r"Corrupt \w+ JSON message '(.*)'\.\s*$", trace, re.M)
        assert quoted is not None, f"the failure names no message:\n{trace[:2000]}"
        matches = [envelope for envelope in pending if envelope.line == quoted.group(1)]
        assert len(matches) == 1, f"the failure names {quoted.group(1)!r}"
        return matches[0]

    def _job(self, first: Envelope, lines: list[str]) -> str:
        self.jobs += 1
        path = self.directory / f"corpus-{self.jobs}.json"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        options = {
            "connector": "filesystem",
            "path": str(path),
            "format": first.format,
            **dict(first.options),
        }
        with_ = ", ".join(f"'{key}' = '{value}'" for key, value in options.items())
        columns = ", ".join(f"`{name}` {FLINK_TYPES[kind]}" for name, kind in COLUMNS)
        self.tables.execute_sql(f"CREATE TEMPORARY TABLE src{self.jobs} ({columns}) WITH ({with_})")
        self.tables.execute_sql(
            f"CREATE TEMPORARY TABLE out{self.jobs} (j STRING) WITH ('connector' = 'print')"
        )
        names = ", ".join(f"`{name}`" for name, _ in COLUMNS)
        statements = self.tables.create_statement_set()
        statements.add_insert_sql(
            f"INSERT INTO out{self.jobs} SELECT JSON_ARRAY({names} NULL ON NULL) FROM src{self.jobs}"
        )
        statements.attach_as_datastream()
        return self.cluster.run(self.env)[0]


@pytest.fixture(autouse=True)
def pyflink_installed() -> None:
    require_pyflink()


@pytest.fixture(scope="module")
def flink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Outcome]]:
    """Every corpus envelope's outcome under Flink's formats."""
    formats = FlinkFormats(tmp_path_factory.mktemp("flink-cdc"))
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[Envelope]] = {}
    for envelope in CORPUS:
        groups.setdefault((envelope.format, envelope.options), []).append(envelope)
    found: dict[str, Outcome] = {}
    try:
        for group in groups.values():
            found.update(formats.outcomes(group))
    finally:
        formats.cluster.close()
    yield found


def ours(envelope: Envelope) -> Outcome:
    """The envelope's outcome under the pipeline's mapping (one file of that one line)."""
    spec = CdcSpec(envelope.format, COLUMNS, "op", "arrival", ("id",))
    try:
        records = file_records(spec, "corpus.json", (envelope.line + "\n").encode())
    except Exception as error:
        return ("crashed", f"{type(error).__name__}: {error}")
    for record in records:
        if record[0].startswith(BAD_OP):
            return ("refused", json.loads(record[0][len(BAD_OP) :])["reason"])
    return ("changes", [(record[0], list(record[2:])) for record in records])


def test_the_corpus_names_are_unique_and_every_format_has_both_outcomes() -> None:
    assert len({envelope.name for envelope in CORPUS}) == len(CORPUS)
    for fmt in ("debezium-json", "canal-json", "maxwell-json"):
        kinds = {ours(envelope)[0] for envelope in CORPUS if envelope.format == fmt and not envelope.differs}
        assert kinds == {"changes", "refused"}, fmt


@pytest.mark.parametrize(
    "envelope",
    [
        pytest.param(
            envelope,
            id=envelope.name,
            marks=[pytest.mark.xfail(strict=True, reason=envelope.differs)] if envelope.differs else [],
        )
        for envelope in CORPUS
    ],
)
def test_each_envelope_maps_as_flinks_format_maps_it(envelope: Envelope, flink: dict[str, Outcome]) -> None:
    theirs, mine = flink[envelope.name], ours(envelope)
    assert comparable(mine) == comparable(theirs), (
        f"{envelope.format} {envelope.line!r}: ours {mine}, Flink {theirs}"
    )


def test_the_nan_of_a_double_is_compared_as_a_value() -> None:
    assert comparable(("changes", [("+I", [math.nan])])) == comparable(("changes", [("+I", [float("nan")])]))
    assert comparable(("changes", [("+I", [1])])) != comparable(("changes", [("+I", [1.0])]))
