"""Where the test run keeps its temporary directories (tests/tmproot.py)."""

from __future__ import annotations

from pathlib import Path

from .prerequisites import require
from .tmproot import is_tmpfs, memory_temproot

MOUNTS = """\
/dev/vda / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw,nosuid,nodev 0 0
shm /run/shm-like ext4 rw 0 0
"""


def test_a_tmpfs_mount_point_is_recognised_by_its_type() -> None:
    assert is_tmpfs(Path("/dev/shm"), MOUNTS)
    assert not is_tmpfs(Path("/"), MOUNTS)
    assert not is_tmpfs(Path("/run/shm-like"), MOUNTS)
    assert not is_tmpfs(Path("/dev"), MOUNTS)


def test_the_opt_out_and_an_explicit_root_win() -> None:
    assert memory_temproot({"UPSERTMAT_TEST_TMPFS": "0"}, min_free=0) is None
    assert memory_temproot({"PYTEST_DEBUG_TEMPROOT": "/somewhere"}, min_free=0) is None


def test_a_folder_that_is_not_a_tmpfs_mount_is_never_chosen(tmp_path: Path) -> None:
    assert memory_temproot({}, candidate=tmp_path, min_free=0) is None


def test_dev_shm_is_chosen_only_with_the_room_asked_for() -> None:
    shm = is_tmpfs(Path("/dev/shm"), Path("/proc/mounts").read_text(encoding="utf-8"))
    require(shm, "/dev/shm mounted as a tmpfs (as Debian and containers have it)")
    assert memory_temproot({}, min_free=0) == Path("/dev/shm")
    assert memory_temproot({}, min_free=1 << 60) is None
