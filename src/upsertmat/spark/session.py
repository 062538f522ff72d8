"""The SparkSession the pipeline and the tests run on: loopback-only and quiet by default.

Settings that matter (see ``docs/spark.md``): the RocksDB state store provider (required by
``transformWithState``), no no-data micro-batches (otherwise ``availableNow`` never ends in
processing-time mode), a small number of shuffle partitions (= state partitions; pinned in a
checkpoint), and the Python workers running this interpreter.

Network: for a local master (``local``, ``local[N]``, ``local[*]``...) or a standalone master on
a loopback address, the driver, its block manager and (when asked for) the UI bind to
``127.0.0.1`` (``spark.driver.bindAddress``/``spark.driver.host``, ``SPARK_LOCAL_IP`` for the
JVM), so an embedded run opens no port on other interfaces. The UI is off unless ``ui=True``.

Java helpers: for such a master, when this call starts the JVM and a JDK's ``javac`` is at hand,
``file:`` paths use :data:`~.jvm.localfs.NIO_LOCAL_FS`, which sets file permissions with a system
call instead of forking ``chmod`` for every file Spark creates (:mod:`.jvm.localfs`), and JSON Lines
are parsed by :data:`~.sources.jsonlines.JSON_LINE_PARSER`, ``from_json``'s rows at the speed of Spark's
JSON file source (:mod:`.sources.jsonlines`). Both are compiled on first use (:mod:`.jvm.jars`).

Logs: when this call starts the JVM, the JVM's stdout and stderr — Spark's log4j console output
and the output of every Python worker it starts (e.g. "Streaming TransformWithStateInPandas
Python worker ...") — go to a log file (:func:`session_log`), not to the console. Its path is
``log_file``, else ``$UPSERTMAT_SPARK_LOG``, else a new file under ``<tmp>/upsertmat-logs/``
(kept after the process exits). O(1) apart from the JVM start (about 4 s).
"""

from __future__ import annotations

import ipaddress
import os
import re
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession

from ..interrupt import call_interruptibly
from .jvm.jars import class_path_conf
from .jvm.localfs import FILE_SYSTEM_CONF, nio_local_fs_conf, nio_local_fs_jar
from .sources.jsonlines import json_line_parser_jar

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
# The serial collector suits a small local heap on few cores. The JIT keeps its C2 tier: stopping
# at C1 (-XX:TieredStopAtLevel=1) started the session faster (4.3 -> 3.5 s) but left the JVM's
# steady-state work (JSON parsing, shuffle, state store) about 15-20 % slower per micro-batch.
FAST_JVM = "-XX:+UseSerialGC"
CHECKPOINT_MANAGER_CONF = "spark.sql.streaming.checkpointFileManagerClass"
# Spark's CheckpointFileManager on Hadoop's FileSystem API (its package moved in Spark 4.1).
# Spark's default (FileContext) renames through AbstractFileSystem.rename, which on the local file
# system asks for the destination's link status and, without Hadoop's native library, forks a
# process (readlink) for it: 50-150 ms per rename on a loaded machine, and every micro-batch
# renames a file per state partition (the changelog) plus the offsets and commit log entries.
FILE_SYSTEM_CHECKPOINT_MANAGERS = (
    "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager",
    "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager",
)
LOOPBACK = "127.0.0.1"
LOG_ENV = "UPSERTMAT_SPARK_LOG"

_started_log: list[Path] = []  # the log file of the JVM this process started (at most one)


class SparkStartError(RuntimeError):
    """The JVM did not start (no Java, a stale ``JAVA_HOME``, an unwritable log): the message names
    the cause as the log shows it and the log's path; ``usage`` is False for an I/O failure."""

    def __init__(self, message: str, log: Path | None, usage: bool = True) -> None:
        super().__init__(message)
        self.log = log
        self.usage = usage


def _cause_in_log(log_file: Path) -> str:
    """The last meaningful line the JVM's launcher wrote to ``log_file`` (e.g. ``/nonexistent/bin/java:
    No such file or directory``), or a hint when it wrote none."""
    try:
        lines = log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-40:]
    except OSError:
        lines = []
    meaningful = [line.strip() for line in lines if line.strip() and not line.startswith((" ", "\t"))]
    for line in reversed(meaningful):
        if any(word in line for word in ("Error", "error", "No such file", "not found", "denied", "JAVA")):
            return line
    return (
        meaningful[-1]
        if meaningful
        else "the Java gateway exited before it answered (is Java 17+ installed?)"
    )


def session_conf(shuffle_partitions: int = 2) -> dict[str, str]:
    """The Spark configuration the pipeline needs (a fresh dict; add to it freely)."""
    return {
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        # Commit a batch's state as a changelog of its writes instead of a RocksDB checkpoint
        # (snapshots are made in the background): state commit 0.2-0.6 -> 0.1-0.2 s per batch.
        "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
        "spark.sql.streaming.noDataMicroBatches.enabled": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # PipelineResult.timings reads every batch's progress report from this history.
        "spark.sql.streaming.numRecentProgressUpdates": "1000",
        "spark.driver.extraJavaOptions": FAST_JVM,
        # Python workers (and transformWithState's state server) talk to the JVM over Unix
        # domain sockets instead of TCP on 127.0.0.1: no port, and a cheaper round trip (each
        # key bucket makes a few per batch).
        "spark.python.unix.domain.socket.enabled": "true",
    }


def is_loopback_master(master: str) -> bool:
    """True for a local master (``local``, ``local[2]``, ``local-cluster[...]``) or a
    ``spark://`` master on a loopback address (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if master == "local" or master.startswith(("local[", "local-cluster[")):
        return True
    found = re.fullmatch(r"spark://\[?([^\]/]+?)\]?:\d+", master)
    if found is None:
        return False
    host = found.group(1)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_conf() -> dict[str, str]:
    """Driver bound to 127.0.0.1: its RPC endpoint and block manager (the UI follows ``SPARK_LOCAL_IP``)."""
    return {
        "spark.driver.bindAddress": LOOPBACK,
        "spark.driver.host": LOOPBACK,
    }


def default_log_file() -> Path:
    """``$UPSERTMAT_SPARK_LOG``, else ``<tmp>/upsertmat-logs/spark-<UTC time>-<pid>.log``."""
    configured = os.environ.get(LOG_ENV)
    if configured:
        return Path(configured)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path(tempfile.gettempdir()) / "upsertmat-logs" / f"spark-{stamp}-{os.getpid()}.log"


def session_log() -> Path | None:
    """The log file of the JVM this process started, or None (no JVM, or one started elsewhere)."""
    return _started_log[0] if _started_log else None


def build_session(
    master: str = "local[2]",
    app_name: str = "upsertmat",
    shuffle_partitions: int = 2,
    conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
    log_file: Path | None = None,
    ui: bool = False,
) -> SparkSession:
    """Get or create the session with :func:`session_conf` plus ``conf`` (which wins).

    A loopback master (:func:`is_loopback_master`) gets :func:`loopback_conf` and, for the JVM,
    ``SPARK_LOCAL_IP=127.0.0.1``; ``ui=True`` turns the Spark UI on (on loopback for such a
    master). When no JVM runs yet, this starts one whose stdout and stderr go to ``log_file``
    (default :func:`default_log_file`; see :func:`session_log`), and, for such a master, with
    :func:`~.jvm.localfs.nio_local_fs_conf` unless ``conf`` names ``spark.hadoop.fs.file.impl`` or
    no ``javac`` is found, and with :func:`~.jsonlines.json_line_parser_jar` on its class paths
    when it compiles. Sets ``PYSPARK_PYTHON`` to this interpreter (workers otherwise run
    ``python3`` from PATH, which may lack upsertmat). JVM options, the class path and the log
    file apply only when this call starts the JVM.

    While the command line's signal handling is active (:mod:`upsertmat.interrupt`), the session
    is built in a helper thread: a Ctrl-C or SIGTERM then ends the command at once, however long
    the JVM takes to start, and pyspark's own SIGINT handler (installed when the SparkContext is
    created in the main thread) is not installed.
    """
    return call_interruptibly(
        lambda: _build_session(master, app_name, shuffle_partitions, conf, log_level, log_file, ui)
    )


def _build_session(
    master: str,
    app_name: str,
    shuffle_partitions: int,
    conf: Mapping[str, str] | None,
    log_level: str,
    log_file: Path | None,
    ui: bool,
) -> SparkSession:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = session_conf(shuffle_partitions)
    if is_loopback_master(master):
        settings.update(loopback_conf())
        os.environ.setdefault("SPARK_LOCAL_IP", LOOPBACK)
    if ui:
        settings["spark.ui.enabled"] = "true"
    settings.update(conf or {})
    if SparkContext._active_spark_context is None and SparkContext._gateway is None:
        if is_loopback_master(master):
            settings.update(_java_helpers_conf(settings))
        _start_jvm(master, app_name, settings, log_file or default_log_file())
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    if CHECKPOINT_MANAGER_CONF not in settings:
        manager = file_system_checkpoint_manager(spark)
        if manager is not None:
            spark.conf.set(CHECKPOINT_MANAGER_CONF, manager)
    return spark


def _java_helpers_conf(settings: Mapping[str, str]) -> dict[str, str]:
    """The settings that add the Java helpers that compile here (see the module docstring)."""
    helpers: dict[str, str] = {}
    if FILE_SYSTEM_CONF not in settings:
        jar = nio_local_fs_jar()
        if jar is not None:
            helpers.update(nio_local_fs_conf(jar, settings))
    parser = json_line_parser_jar()
    if parser is not None:
        helpers.update(class_path_conf([parser], {**settings, **helpers}))
    return helpers


def file_system_checkpoint_manager(spark: SparkSession) -> str | None:
    """The class name of Spark's ``FileSystemBasedCheckpointFileManager`` in this JVM, or None.

    :func:`build_session` makes it the session's checkpoint file manager (unless ``conf`` names
    one): offsets, commits and the state store's changelog files are still written to a
    temporary file and renamed into place, but through Hadoop's ``FileSystem.rename`` (a
    ``rename(2)`` on a local disk) instead of ``FileContext.rename``, which forks a ``readlink``
    process per rename on the local file system (see :data:`FILE_SYSTEM_CHECKPOINT_MANAGERS`).
    What it gives up: the rename of an offsets or commit log entry checks that the entry does
    not exist and then renames, instead of renaming atomically only if it does not exist, so two
    queries running at the same time on ONE checkpoint (which Spark does not support either way)
    are no longer stopped by the log; the sink still refuses to apply a batch id twice.
    """
    lang = spark.sparkContext._jvm.java.lang  # type: ignore[union-attr]
    for name in FILE_SYSTEM_CHECKPOINT_MANAGERS:
        try:
            lang.Class.forName(name)
        except Exception:  # py4j reports ClassNotFoundException as a Py4JJavaError
            continue
        return name
    return None


def _start_jvm(master: str, app_name: str, settings: Mapping[str, str], log_file: Path) -> None:
    """Start the JVM with its stdout and stderr in ``log_file`` and create the SparkContext on it."""
    spark_conf = SparkConf().setMaster(master).setAppName(app_name)
    for key, value in settings.items():
        spark_conf.set(key, value)
    try:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log = log_file.open("ab")
    except OSError as error:
        raise SparkStartError(
            f"cannot write Spark's log {log_file}: {error.strerror} (set {LOG_ENV} to another file)",
            None,
            usage=False,
        ) from None
    _started_log[:] = [log_file]  # known from the launch on: an interrupted start names it too
    with log:
        # The child keeps its own copies of the descriptor; ours is closed on leaving the block.
        # Its own session: a Ctrl-C in the terminal reaches only this process, which stops the
        # query at a batch boundary, instead of also killing the JVM and its Python workers
        # mid-batch (pyspark ignores SIGINT in the JVM, but the workers it forks restore it).
        popen = {"stdout": log, "stderr": log, "start_new_session": True}
        try:
            gateway = launch_gateway(spark_conf, popen_kwargs=popen)  # type: ignore[no-untyped-call]
        except Exception as error:  # PySparkRuntimeError [JAVA_GATEWAY_EXITED], or an OSError
            log.flush()
            _started_log.clear()
            cause = _cause_in_log(log_file)
            raise SparkStartError(
                f"Spark did not start: {cause} (check JAVA_HOME and Java 17+; Spark's log: {log_file})",
                log_file,
            ) from error
    SparkContext(conf=spark_conf, gateway=gateway)
