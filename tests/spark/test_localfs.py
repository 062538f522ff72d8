"""upsertmat.spark.jvm.localfs: the Hadoop local file system that sets permissions by system call."""

from __future__ import annotations

import os
import stat
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from upsertmat.spark.jvm.jars import CACHE_ENV, find_javac
from upsertmat.spark.jvm.localfs import FILE_SYSTEM_CONF, NIO_LOCAL_FS, nio_local_fs_conf, nio_local_fs_jar

from .javac import require_javac

pytestmark = pytest.mark.spark


def test_the_jar_is_compiled_once_and_holds_both_classes(tmp_path: Path) -> None:
    require_javac()
    jar = nio_local_fs_jar(tmp_path)
    assert jar is not None and jar.parent == tmp_path
    with zipfile.ZipFile(jar) as archive:
        assert sorted(archive.namelist()) == [
            "upsertmat/hadoop/NioLocalFileSystem.class",
            "upsertmat/hadoop/NioRawLocalFileSystem.class",
        ]
    built = jar.stat().st_mtime_ns
    assert nio_local_fs_jar(tmp_path) == jar
    assert jar.stat().st_mtime_ns == built
    assert [path.name for path in tmp_path.iterdir()] == [jar.name]  # no build directory left behind


def test_without_a_working_javac_there_is_no_jar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    javac = home / "bin" / "javac"
    javac.write_text("#!/bin/sh\necho 'javac: broken' >&2\nexit 2\n")
    javac.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert find_javac() == javac
    assert nio_local_fs_jar(tmp_path / "cache") is None
    assert not list((tmp_path / "cache").glob("*.jar"))


def test_an_unwritable_directory_gives_no_jar_and_no_error(tmp_path: Path) -> None:
    require_javac()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    assert nio_local_fs_jar(blocker / "cache") is None


def test_an_unwritable_cache_falls_back_to_the_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_javac()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    jar = nio_local_fs_jar()
    assert jar is not None and jar.parent == tmp_path / "tmp" / f"upsertmat-cache-{os.getuid()}"


def test_the_conf_keeps_the_callers_class_path_ahead_of_the_jar() -> None:
    jar = Path("/cache/upsertmat-localfs.jar")
    conf = nio_local_fs_conf(jar, {"spark.driver.extraClassPath": "/opt/mine.jar"})
    assert conf == {
        "spark.driver.extraClassPath": f"/opt/mine.jar{os.pathsep}{jar}",
        "spark.executor.extraClassPath": str(jar),
        FILE_SYSTEM_CONF: NIO_LOCAL_FS,
    }


def local_fs(spark: SparkSession) -> Any:
    """The session's local Hadoop file system (``FileSystem.getLocal``)."""
    jvm: Any = spark.sparkContext._jvm
    return jvm.org.apache.hadoop.fs.FileSystem.getLocal(spark.sparkContext._jsc.hadoopConfiguration())


def hadoop_path(spark: SparkSession, path: Path) -> Any:
    jvm: Any = spark.sparkContext._jvm
    return jvm.org.apache.hadoop.fs.Path(str(path))


def test_the_session_writes_local_files_through_it(spark: SparkSession) -> None:
    require_javac()
    assert spark.sparkContext._jsc.hadoopConfiguration().get("fs.file.impl") == NIO_LOCAL_FS
    assert local_fs(spark).getClass().getName() == NIO_LOCAL_FS


def set_permission(spark: SparkSession, path: Path, octal: str) -> None:
    """``setPermission(path, octal)`` on the session's local Hadoop file system."""
    jvm: Any = spark.sparkContext._jvm
    local_fs(spark).setPermission(
        hadoop_path(spark, path), jvm.org.apache.hadoop.fs.permission.FsPermission(octal)
    )


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o644, 0o755, 0o444, 0o000, 0o777])
def test_set_permission_sets_exactly_the_bits(spark: SparkSession, tmp_path: Path, mode: int) -> None:
    require_javac()
    path = tmp_path / "file"
    output = local_fs(spark).create(hadoop_path(spark, path), True)
    output.write(b"x")
    output.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # a new file: 0666 under Hadoop's default umask 022
    set_permission(spark, path, f"{mode:03o}")
    assert stat.S_IMODE(path.stat().st_mode) == mode


def test_a_sticky_bit_is_set_too(spark: SparkSession, tmp_path: Path) -> None:
    """java.nio cannot set the sticky bit: such a permission still goes through chmod(1)."""
    require_javac()
    directory = tmp_path / "shared"
    directory.mkdir()
    set_permission(spark, directory, "1777")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o1777
