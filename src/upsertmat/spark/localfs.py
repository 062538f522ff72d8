"""A Hadoop local file system for Spark's checkpoints that sets permissions without a process.

Without Hadoop's native library (pyspark ships none), Hadoop's ``RawLocalFileSystem`` runs the
``chmod`` program for every file it creates: a micro-batch of the pipeline creates about ten
(the offsets and commit log entries, the file source's log entry, a state changelog per state
partition, each with its ``.crc`` checksum file), so about ten processes per batch, 2-5 ms each,
most of them on the batch's critical path. :data:`NIO_LOCAL_FS` (Java source beside this module,
``java/upsertmat/hadoop``) is Hadoop's checksummed ``LocalFileSystem`` whose ``setPermission`` is
a ``chmod(2)`` system call through ``java.nio``: the same files, the same permission bits.

:func:`nio_local_fs_jar` compiles it once with the JDK's ``javac`` into a small jar in the user's
cache directory (keyed by the source and the Hadoop jar it compiles against) and returns None
when no ``javac`` is found or compiling fails; :func:`nio_local_fs_conf` gives the Spark settings
that use it. Only a JVM this process starts can take it (the jar must be on the class path at
start), and only where executors see the same files as the driver (a local master, or a
standalone cluster on this machine); :func:`~.session.build_session` decides.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

NIO_LOCAL_FS = "upsertmat.hadoop.NioLocalFileSystem"
SOURCES = Path(__file__).parent / "java"
CACHE_ENV = "UPSERTMAT_CACHE_DIR"
FILE_SYSTEM_CONF = "spark.hadoop.fs.file.impl"


def java_sources() -> list[Path]:
    """The Java sources of :data:`NIO_LOCAL_FS`, in a stable order."""
    return sorted(SOURCES.rglob("*.java"))


def hadoop_jars() -> list[Path]:
    """The Hadoop client jars pyspark ships (what the class compiles against)."""
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-*.jar"))


def cache_dir() -> Path:
    """``$UPSERTMAT_CACHE_DIR``, else ``$XDG_CACHE_HOME/upsertmat``, else ``~/.cache/upsertmat``."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "upsertmat"


def find_javac() -> Path | None:
    """``$JAVA_HOME/bin/javac`` if it exists, else ``javac`` on PATH, else None."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "javac").is_file():
        return Path(home) / "bin" / "javac"
    found = shutil.which("javac")
    return Path(found) if found else None


def nio_local_fs_jar(directory: Path | None = None) -> Path | None:
    """The jar holding :data:`NIO_LOCAL_FS`, compiled on first use; None without a usable ``javac``.

    ``directory``: where jars are kept (default :func:`cache_dir`, or, when that cannot be
    written, ``upsertmat-cache-<uid>`` in the temporary directory). The jar's name carries a
    digest of the sources and of the Hadoop jars' names, so a changed source or another pyspark
    gets its own jar. Compiling (~1-2 s) writes to a temporary directory and renames the jar
    into place, so concurrent first uses do not see a partial jar.
    """
    jars = hadoop_jars()
    javac = find_javac()
    if javac is None or not jars:
        return None
    digest = hashlib.sha256()
    for source in java_sources():
        digest.update(source.read_bytes())
    for jar in jars:
        digest.update(jar.name.encode())
    name = f"upsertmat-localfs-{digest.hexdigest()[:16]}.jar"
    # A home without a writable cache (a read-only or missing home) falls back to the temp dir.
    fallback = Path(tempfile.gettempdir()) / f"upsertmat-cache-{os.getuid()}"
    for place in [directory] if directory is not None else [cache_dir(), fallback]:
        target = place / name
        if target.is_file():
            return target
        try:
            return _compile(javac, jars, target)
        except OSError:  # not writable: try the next place, else Hadoop's default stays
            continue
    return None


def _compile(javac: Path, jars: list[Path], target: Path) -> Path | None:
    """Compile the sources into the jar ``target`` (None if javac fails)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as name:
        classes = Path(name) / "classes"
        command = [str(javac), "--release", "17", "-nowarn", "-cp", os.pathsep.join(map(str, jars))]
        command += ["-d", str(classes), *map(str, java_sources())]
        try:
            subprocess.run(command, check=True, capture_output=True, timeout=120)
        except subprocess.SubprocessError:
            return None
        partial = Path(name) / "partial.jar"
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, target)
    return target


def nio_local_fs_conf(jar: Path, settings: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that make ``file:`` paths use :data:`NIO_LOCAL_FS` from ``jar`` (driver and
    executors on this machine): ``jar`` is appended to the class paths ``settings`` already has."""

    def after_existing(key: str) -> str:
        return os.pathsep.join(filter(None, [settings.get(key), str(jar)]))

    return {
        "spark.driver.extraClassPath": after_existing("spark.driver.extraClassPath"),
        "spark.executor.extraClassPath": after_existing("spark.executor.extraClassPath"),
        FILE_SYSTEM_CONF: NIO_LOCAL_FS,
    }
