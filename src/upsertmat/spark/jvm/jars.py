"""Small Java helpers compiled on first use: each a jar built with the JDK's ``javac`` from the
sources beside this module (``java/upsertmat/<package>/``) against pyspark's own jars.

:func:`compiled_jar` compiles one package into a jar in the user's cache directory, named by a
digest of its sources and of the jars it compiles against, so a changed source or another
pyspark gets its own jar; it returns None when no ``javac`` is found or compiling fails (the
caller then keeps Spark's default). Compiling (~1-3 s) writes to a temporary directory and
renames the jar into place, so concurrent first uses do not see a partial jar. Only a JVM this
process starts can take such a jar (it must be on the class path at start):
:func:`~.session.build_session` decides, and :func:`class_path_conf` gives the settings.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

SOURCES = Path(__file__).parent / "java"
CACHE_ENV = "UPSERTMAT_CACHE_DIR"
CLASS_PATH_CONFS = ("spark.driver.extraClassPath", "spark.executor.extraClassPath")


def java_sources(package: str) -> list[Path]:
    """The Java sources of ``package`` (e.g. ``upsertmat.hadoop``), in a stable order."""
    return sorted((SOURCES / package.replace(".", "/")).glob("*.java"))


def pyspark_jars(pattern: str = "*.jar") -> list[Path]:
    """The jars pyspark ships that match ``pattern``, sorted."""
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob(pattern))


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


def compiled_jar(
    stem: str, sources: Sequence[Path], class_path: Sequence[Path], directory: Path | None = None
) -> Path | None:
    """The jar ``<stem>-<digest>.jar`` of ``sources`` compiled against ``class_path``, compiled
    on first use; None without a usable ``javac`` or when compiling fails.

    ``directory``: where jars are kept (default :func:`cache_dir`, or, when that cannot be
    written, ``upsertmat-cache-<uid>`` in the temporary directory). The digest covers the
    sources' bytes and the class path jars' names.
    """
    javac = find_javac()
    if javac is None or not sources or not class_path:
        return None
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    for jar in class_path:
        digest.update(jar.name.encode())
    name = f"{stem}-{digest.hexdigest()[:16]}.jar"
    # A home without a writable cache (a read-only or missing home) falls back to the temp dir.
    fallback = Path(tempfile.gettempdir()) / f"upsertmat-cache-{os.getuid()}"
    for place in [directory] if directory is not None else [cache_dir(), fallback]:
        target = place / name
        if target.is_file():
            return target
        try:
            return _compile(javac, sources, class_path, target)
        except OSError:  # not writable: try the next place, else the caller keeps the default
            continue
    return None


def _compile(javac: Path, sources: Sequence[Path], class_path: Sequence[Path], target: Path) -> Path | None:
    """Compile ``sources`` into the jar ``target`` (None if javac fails)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as name:
        classes = Path(name) / "classes"
        command = [str(javac), "--release", "17", "-nowarn"]
        command += ["-cp", os.pathsep.join(map(str, class_path)), "-d", str(classes)]
        try:
            subprocess.run([*command, *map(str, sources)], check=True, capture_output=True, timeout=120)
        except subprocess.SubprocessError:
            return None
        partial = Path(name) / "partial.jar"
        with zipfile.ZipFile(partial, "w") as archive:
            for path in sorted(classes.rglob("*.class")):
                archive.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, target)
    return target


def class_path_conf(jars: Sequence[Path], settings: Mapping[str, str]) -> dict[str, str]:
    """Spark settings that put ``jars`` on the driver's and the executors' class paths (on this
    machine), after the class path entries ``settings`` already has."""
    return {
        key: os.pathsep.join(filter(None, [settings.get(key), *map(str, jars)])) for key in CLASS_PATH_CONFS
    }
