"""A Hadoop local file system for Spark's checkpoints that sets permissions without a process.

Without Hadoop's native library (pyspark ships none), Hadoop's ``RawLocalFileSystem`` runs the
``chmod`` program for every file it creates: a micro-batch of the pipeline creates about ten
(the offsets and commit log entries, the file source's log entry, a state changelog per state
partition, each with its ``.crc`` checksum file), so about ten processes per batch, 2-5 ms each,
most of them on the batch's critical path. :data:`NIO_LOCAL_FS` (Java source beside this module,
``java/upsertmat/hadoop``) is Hadoop's checksummed ``LocalFileSystem`` whose ``setPermission`` is
a ``chmod(2)`` system call through ``java.nio``: the same files, the same permission bits.

:func:`nio_local_fs_jar` compiles it once with the JDK's ``javac`` into a small jar in the user's
cache directory (:func:`~.jars.compiled_jar`: keyed by the sources and the Hadoop jars they
compile against) and returns None when no ``javac`` is found or compiling fails;
:func:`nio_local_fs_conf` gives the Spark settings that use it. Only a JVM this process starts
can take it (the jar must be on the class path at start), and only where executors see the same
files as the driver (a local master, or a standalone cluster on this machine);
:func:`~.session.build_session` decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .jars import class_path_conf, compiled_jar, java_sources, pyspark_jars

NIO_LOCAL_FS = "upsertmat.hadoop.NioLocalFileSystem"
FILE_SYSTEM_CONF = "spark.hadoop.fs.file.impl"
PACKAGE = "upsertmat.hadoop"


def nio_local_fs_jar(directory: Path | None = None) -> Path | None:
    """The jar holding :data:`NIO_LOCAL_FS`, compiled on first use against pyspark's Hadoop client
    jars; None without a usable ``javac`` (see :func:`~.jars.compiled_jar`, ``directory``)."""
    hadoop = pyspark_jars("hadoop-client-*.jar")
    return compiled_jar("upsertmat-localfs", java_sources(PACKAGE), hadoop, directory)


def nio_local_fs_conf(jar: Path, settings: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that make ``file:`` paths use :data:`NIO_LOCAL_FS` from ``jar`` (driver and
    executors on this machine): ``jar`` is appended to the class paths ``settings`` already has."""
    return {**class_path_conf([jar], settings), FILE_SYSTEM_CONF: NIO_LOCAL_FS}
