"""Apache Flink 2.3's real SinkUpsertMaterializer as a program under test (``upsertmat[flink]``).

    upsertmat conformance-flink --strategy MAP [--backend rocksdb] --pk 0 --upsert-key 1

speaks the process protocol (:mod:`upsertmat.conformance.protocol`) on stdin and stdout
(:func:`serve`, with :class:`FlinkOptions`), so the suite runs against it with
``pytest --upsertmat-cmd "upsertmat conformance-flink --strategy MAP"``.

How: one JVM (PyFlink's local mini-cluster) per process. Input lines are read until stdin is
idle for ``--idle`` seconds (or ends); each such chunk runs as one Flink job
``INSERT INTO snk SELECT * FROM src`` with ``table.exec.sink.upsert-materialize=FORCE`` and
the chosen ``...-strategy.type``, parallelism 1, the source a changelog stream whose primary
key (sink key + upsert key columns) is the upsert key, the sink a ``print`` table with the sink
key as primary key (its output captured by redirecting the JVM's ``System.out``). Column values
travel as the hex of their JSON text (strings compare exactly as JSON values do, and the print
sink's ``+I[a, b]`` stays parseable). After every change a *marker* insert on a fresh key is
added; markers always emit ``+I`` and the per-record order is kept (parallelism 1), so the
outputs between two markers belong to the change between them: that gives each output its
``in``. State does not outlive a chunk (each job starts empty): correct for the suite, which
writes each stream whole on sink keys of its own. No TTL (``SinkUpsertMaterializerV2`` turns
it off): any ``--set`` is refused with exit code 2. A failing job ends :func:`serve` with 70 and
the Java exception on stderr.
"""

from __future__ import annotations

import json
import os
import re
import select
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OUTPUT = re.compile(r"([+-][IUD])\[(.*)\]")


STRATEGIES = ("LEGACY", "VALUE", "MAP", "ADAPTIVE")
"""Flink 2.3's strategies (SORTED is upsertmat's own)."""
BACKENDS = ("hashmap", "rocksdb")


@dataclass(frozen=True)
class FlinkOptions:
    """The operator under test: strategy, Flink state backend, ADAPTIVE's thresholds, the keys
    (0-based columns) and the stdin pause that ends a chunk (seconds)."""

    pk: tuple[int, ...]
    upsert_key: tuple[int, ...] = ()
    strategy: str = "LEGACY"
    backend: str = "hashmap"
    threshold_high: int | None = None
    threshold_low: int | None = None
    idle: float = 0.3


class FlinkMaterializer:
    """One PyFlink table environment; :meth:`run` feeds one chunk as one job."""

    def __init__(self, options: FlinkOptions) -> None:
        from pyflink.datastream import StreamExecutionEnvironment
        from pyflink.table import StreamTableEnvironment

        self.pk = list(options.pk)
        self.upsert_key = list(options.upsert_key)
        self.env = StreamExecutionEnvironment.get_execution_environment()
        self.env.set_parallelism(1)
        self.tables = StreamTableEnvironment.create(self.env)
        config = self.tables.get_config()
        config.set("table.exec.sink.upsert-materialize", "FORCE")
        config.set("table.exec.sink.upsert-materialize-strategy.type", options.strategy)
        config.set("table.exec.sink.require-on-conflict", "false")
        config.set("state.backend.type", options.backend)
        if options.threshold_high is not None:
            config.set(
                "table.exec.sink.upsert-materialize-strategy.adaptive.threshold.high",
                str(options.threshold_high),
            )
        if options.threshold_low is not None:
            config.set(
                "table.exec.sink.upsert-materialize-strategy.adaptive.threshold.low",
                str(options.threshold_low),
            )
        self.jobs = 0

    def _row(self, kind: str, values: Sequence[Any]) -> Any:
        from pyflink.common import Row, RowKind

        kinds = {
            "+I": RowKind.INSERT,
            "-U": RowKind.UPDATE_BEFORE,
            "+U": RowKind.UPDATE_AFTER,
            "-D": RowKind.DELETE,
        }
        row = Row(*[json.dumps(value, ensure_ascii=False).encode().hex() for value in values])
        row.set_row_kind(kinds[kind])
        return row

    def run(self, changes: list[tuple[int, str, list[Any]]]) -> list[tuple[int, str, list[Any]]]:
        """Outputs ``(in, op, row)`` of one job over ``changes`` ``(in, op, row)``."""
        from pyflink.common import Types
        from pyflink.java_gateway import get_gateway
        from pyflink.table import DataTypes, Schema
        from pyflink.table.changelog_mode import ChangelogMode

        if not changes:
            return []
        arity = len(changes[0][2])
        names = [f"c{i}" for i in range(arity)]
        keyed = sorted(set(self.pk) | set(self.upsert_key))
        rows = []
        for position, (_, op, values) in enumerate(changes):
            rows.append(self._row(op, values))
            marker: list[Any] = [None] * arity
            for column in self.pk:
                marker[column] = f"marker|{position}"
            rows.append(self._row("+I", marker))
        self.jobs += 1
        stream = self.env.from_collection(rows, type_info=Types.ROW_NAMED(names, [Types.STRING()] * arity))
        schema = Schema.new_builder()
        for index, name in enumerate(names):
            schema.column(name, DataTypes.STRING().not_null() if index in keyed else DataTypes.STRING())
        if self.upsert_key:
            schema.primary_key(*[names[i] for i in keyed])
        source = f"src{self.jobs}"
        sink = f"snk{self.jobs}"
        self.tables.create_temporary_view(
            source, self.tables.from_changelog_stream(stream, schema.build(), ChangelogMode.all())
        )
        columns = ", ".join(f"{n} STRING{' NOT NULL' if i in self.pk else ''}" for i, n in enumerate(names))
        key = ", ".join(names[i] for i in self.pk)
        self.tables.execute_sql(
            f"CREATE TEMPORARY TABLE {sink} ({columns}, PRIMARY KEY ({key}) NOT ENFORCED) "
            "WITH ('connector'='print')"
        )
        jvm = get_gateway().jvm
        previous = jvm.System.out
        with tempfile.TemporaryDirectory(prefix="upsertmat-flink-") as directory:
            path = Path(directory) / "out.txt"
            jvm.System.setOut(jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(path)), True, "UTF-8"))
            try:
                self.tables.execute_sql(f"INSERT INTO {sink} SELECT * FROM {source}").wait()
            finally:
                jvm.System.setOut(previous)
            text = path.read_text(encoding="utf-8")
        outputs: list[tuple[int, str, list[Any]]] = []
        position = 0
        for line in text.splitlines():
            match = OUTPUT.search(line)
            if match is None:
                continue
            values = [json.loads(bytes.fromhex(part.strip()).decode()) for part in match.group(2).split(",")]
            if values[self.pk[0]] == f"marker|{position}":
                position += 1
                continue
            outputs.append((changes[position][0], match.group(1), values))
        return outputs


def _chunks(idle: float) -> Any:
    """Complete input lines, grouped by pauses of ``idle`` seconds; ``(first index, lines)``."""
    pending = b""
    lines: list[bytes] = []
    index = 0
    while True:
        ready, _, _ = select.select([0], [], [], idle if lines else None)
        if not ready:
            yield index - len(lines), lines
            lines = []
            continue
        data = os.read(0, 1 << 16)
        if not data:
            if pending:
                lines.append(pending)
                index += 1
            if lines:
                yield index - len(lines), lines
            return
        pending += data
        *complete, pending = pending.split(b"\n")
        lines += complete
        index += len(complete)


def serve(options: FlinkOptions) -> int:
    """Run the protocol on stdin/stdout until stdin ends; 0, or 70 when a Flink job failed (its
    Java cause on stderr)."""
    materializer = FlinkMaterializer(options)
    for first, lines in _chunks(options.idle):
        changes = []
        for offset, line in enumerate(lines):
            if not line.strip():
                continue
            value = json.loads(line)
            if "op" in value:
                changes.append((first + offset, value["op"], value["row"]))
        try:
            outputs = materializer.run(changes)
        except Exception as error:
            causes = [
                line.strip() for line in str(error).splitlines() if line.strip().startswith("Caused by:")
            ]
            print(
                f"upsertmat conformance-flink: the Flink job failed: {causes[-1] if causes else error}",
                file=sys.stderr,
            )
            return 70
        for index, op, row in outputs:
            sys.stdout.write(json.dumps({"in": index, "op": op, "row": row}, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return 0
