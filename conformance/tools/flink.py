"""Apache Flink 2.3's real SinkUpsertMaterializer as a program under test (``upsertmat[flink]``).

    upsertmat conformance-flink --strategy MAP [--backend rocksdb] --pk 0 --upsert-key 1

speaks the process protocol (:mod:`upsertmat.conformance.protocol`) on stdin and stdout
(:func:`serve`, with :class:`FlinkOptions`), so the suite runs against it with
``pytest --upsertmat-cmd "upsertmat conformance-flink --strategy MAP"``.

How: one JVM (PyFlink's) per process, holding one Flink ``MiniCluster`` (one task manager, one
slot, its sockets on 127.0.0.1) for the process's lifetime. Input lines are read until stdin is
idle for ``--idle`` seconds (or ends); each such chunk runs as one Flink job ``INSERT INTO snk
SELECT * FROM src`` with ``table.exec.sink.upsert-materialize=FORCE`` and the chosen
``...-strategy.type``, parallelism 1, the source a changelog stream whose primary key (sink key
+ upsert key columns) is the upsert key, the sink a ``print`` table with the sink key as primary
key (its output captured by redirecting the JVM's ``System.out``); the job graph is submitted to
the kept cluster, so a job costs its own run, not a cluster start. Column values travel as the
hex of their JSON text (strings compare exactly as JSON values do, and the print sink's
``+I[a, b]`` stays parseable). After every change a *marker* insert on a fresh key is added; markers
always emit ``+I`` and the per-record order is kept (parallelism 1), so the outputs between two
markers belong to the change between them: that gives each output its ``in``. A job starts with
empty state, so a chunk's job first replays every earlier change of the sink keys the chunk
touches (their outputs dropped; the operator is deterministic per key): state outlives the
chunks, whatever pauses split the input. Each job is checked to have run on the state backend
asked for (Flink names it in the job's archived graph). No TTL (``SinkUpsertMaterializerV2``
turns it off): any ``--set`` is refused with exit code 2. A failing job ends :func:`serve` with
70 and the Java exception on stderr. The JVM runs with C1 only (:data:`JVM_ARGS`) unless
``JVM_ARGS`` is set. Cost per chunk: one job over the chunk plus its keys' earlier changes (a
fraction of a second); per process, the JVM's start (seconds).
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
    idle: float = 0.05


JVM_ARGS = "-XX:TieredStopAtLevel=1"
"""The JVM options of :func:`serve`'s JVM when ``JVM_ARGS`` is not set."""
BACKEND_CLASSES = {"hashmap": "HashMapStateBackend", "rocksdb": "EmbeddedRocksDBStateBackend"}
"""The state backend Flink reports for a job, per ``state.backend.type``."""


LOCAL_ONLY = {
    "rest.bind-address": "127.0.0.1",
    "rest.address": "127.0.0.1",
    "rest.bind-port": "0",
    "jobmanager.bind-host": "127.0.0.1",
    "taskmanager.bind-host": "127.0.0.1",
}
"""The kept cluster's sockets: on 127.0.0.1 only, on free ports (several adapters run at once)."""


class FlinkJobError(RuntimeError):
    """A Flink job failed; the message is its Java stack trace (``Caused by:`` lines),
    ``printed`` what the job printed before it failed."""

    def __init__(self, message: str, printed: str = "") -> None:
        super().__init__(message)
        self.printed = printed


class LocalCluster:
    """A Flink ``MiniCluster`` (one task manager, one slot, its sockets on 127.0.0.1) kept for
    the process's lifetime, in PyFlink's JVM; :meth:`run` runs one job on it."""

    def __init__(self) -> None:
        from pyflink.java_gateway import get_gateway

        self.jvm = get_gateway().jvm
        flink = self.jvm.org.apache.flink
        settings = flink.configuration.Configuration()
        for key, value in LOCAL_ONLY.items():
            settings.setString(key, value)
        cluster = (
            flink.runtime.minicluster.MiniClusterConfiguration.Builder()
            .setConfiguration(settings)
            .setNumTaskManagers(1)
            .setNumSlotsPerTaskManager(1)
            .build()
        )
        self.cluster = flink.runtime.minicluster.MiniCluster(cluster)
        self.cluster.start()

    def run(self, env: Any) -> tuple[str, str]:
        """Run the job of ``env`` (a PyFlink ``StreamExecutionEnvironment`` whose pipeline is
        built, e.g. by a statement set's ``attach_as_datastream``) and wait for it; what the
        JVM's ``System.out`` received meanwhile (the ``print`` connector's rows) and the name of
        the state backend the job ran on. FlinkJobError, with the Java stack trace and what was
        printed, if it failed."""
        graph = env._j_stream_execution_environment.getStreamGraph().getJobGraph()
        jvm = self.jvm
        previous = jvm.System.out
        failure: FlinkJobError | None = None
        with tempfile.TemporaryDirectory(prefix="upsertmat-flink-") as directory:
            path = Path(directory) / "out.txt"
            jvm.System.setOut(jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(path)), True, "UTF-8"))
            try:
                archived = self.submit(graph)
            except FlinkJobError as error:
                failure = error
            finally:
                jvm.System.out.close()
                jvm.System.setOut(previous)
            text = path.read_text(encoding="utf-8")
        if failure is not None:
            failure.printed = text
            raise failure
        backend = archived.getStateBackendName()
        return text, backend.get() if backend.isPresent() else "no state backend"

    def submit(self, graph: Any) -> Any:
        """Run the Java ``JobGraph`` ``graph`` and wait for it; its archived execution graph
        (every task's final metrics). FlinkJobError, with the Java stack trace, if it failed."""
        self.cluster.submitJob(graph).get()
        result = self.cluster.requestJobResult(graph.getJobID()).get()
        if not result.isSuccess():
            thrown = result.getSerializedThrowable()
            trace = thrown.get().getFullStringifiedStackTrace() if thrown.isPresent() else "the job failed"
            raise FlinkJobError(trace)
        return self.cluster.getArchivedExecutionGraph(graph.getJobID()).get()

    def close(self) -> None:
        """Stop the cluster."""
        self.cluster.close()


def environments(settings: dict[str, str]) -> tuple[Any, Any]:
    """A PyFlink ``StreamExecutionEnvironment`` (parallelism 1, ``settings`` in its
    configuration) and a ``StreamTableEnvironment`` on it, to build jobs that
    :meth:`LocalCluster.run` runs."""
    from pyflink.common import Configuration
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.table import StreamTableEnvironment

    # No Python function runs in these jobs, so no Python worker is needed; without this PyFlink
    # starts its loopback worker server, which listens on every interface.
    os.environ["_python_worker_execution_mode"] = "process"  # noqa: SIM112 (PyFlink's name)
    configuration = Configuration()
    for key, value in settings.items():
        configuration.set_string(key, value)
    env = StreamExecutionEnvironment.get_execution_environment(configuration)
    env.set_parallelism(1)
    return env, StreamTableEnvironment.create(env)


class FlinkMaterializer:
    """One kept MiniCluster and table environment; :meth:`run` feeds one chunk as one job."""

    def __init__(self, options: FlinkOptions) -> None:
        self.pk = list(options.pk)
        self.upsert_key = list(options.upsert_key)
        self.backend = options.backend
        self.cluster = LocalCluster()
        self.env, self.tables = environments({"state.backend.type": options.backend})
        config = self.tables.get_config()
        config.set("table.exec.sink.upsert-materialize", "FORCE")
        config.set("table.exec.sink.upsert-materialize-strategy.type", options.strategy)
        config.set("table.exec.sink.require-on-conflict", "false")
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
        self.history: dict[str, list[tuple[str, list[Any]]]] = {}
        """Sink key (JSON of its values) -> every change fed on it so far, in order."""

    def close(self) -> None:
        """Stop the cluster."""
        self.cluster.close()

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

    def _sink_key(self, values: Sequence[Any]) -> str:
        return json.dumps([values[column] for column in self.pk])

    def run(self, changes: list[tuple[int, str, list[Any]]]) -> list[tuple[int, str, list[Any]]]:
        """Outputs ``(in, op, row)`` of one job over ``changes`` ``(in, op, row)``, after the
        earlier changes of their sink keys (replayed, their outputs dropped). FlinkJobError if
        the job fails."""
        if not changes:
            return []
        touched = dict.fromkeys(self._sink_key(values) for _, _, values in changes)
        replayed = [change for key in touched for change in self.history.get(key, [])]
        fed = replayed + [(op, values) for _, op, values in changes]
        text = self._job(fed, len(changes[0][2]))
        for _, op, values in changes:
            self.history.setdefault(self._sink_key(values), []).append((op, values))
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
            if position >= len(replayed):
                outputs.append((changes[position - len(replayed)][0], match.group(1), values))
        return outputs

    def _job(self, fed: list[tuple[str, list[Any]]], arity: int) -> str:
        """Run one job over ``fed`` (a marker after each change); what its print sink wrote."""
        from pyflink.common import Types
        from pyflink.table import DataTypes, Schema
        from pyflink.table.changelog_mode import ChangelogMode

        names = [f"c{i}" for i in range(arity)]
        keyed = sorted(set(self.pk) | set(self.upsert_key))
        rows = []
        for position, (op, values) in enumerate(fed):
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
        statements = self.tables.create_statement_set()
        statements.add_insert_sql(f"INSERT INTO {sink} SELECT * FROM {source}")
        statements.attach_as_datastream()
        text, ran_on = self.cluster.run(self.env)
        expected = BACKEND_CLASSES[self.backend]
        if ran_on != expected:
            raise FlinkJobError(
                f"Caused by: the job ran on {ran_on}, not {expected} (--backend {self.backend})"
            )
        return text


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
    # C1 only, unless the caller set JVM_ARGS (PyFlink passes it to its JVM): the jobs are tiny,
    # so the JVM's start (class loading, cold code) is most of a session's time, and C2's
    # compiler threads would compete with it for the cores.
    os.environ.setdefault("JVM_ARGS", JVM_ARGS)
    materializer = FlinkMaterializer(options)
    try:
        return _serve(materializer, options.idle)
    finally:
        materializer.close()


def _serve(materializer: FlinkMaterializer, idle: float) -> int:
    for first, lines in _chunks(idle):
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
