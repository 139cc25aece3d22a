"""The jail's choice of which mounts to remount read-only, and the /proc it keeps for nested jails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from optiml.integrity import jail
from optiml.integrity.jail import parse, visible_mount_points

# A container's mountinfo after `unshare --mount-proc`: a new /proc (63) stacked on the old one (45),
# /dev/shm and /dev/pts mounted twice, and a mount under the old /proc that is no longer reachable.
MOUNTINFO = """\
43 42 254:0 / / rw,relatime - ext4 /dev/vda rw
45 43 0:21 / /proc rw,relatime - proc proc rw
70 45 0:50 / /proc/sys/fs/binfmt_misc rw,relatime - binfmt_misc binfmt_misc rw
46 43 0:22 / /sys rw,relatime - sysfs sysfs rw
47 46 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw
58 43 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw
59 58 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
60 59 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw
61 58 0:24 / /dev/pts rw,relatime - devpts devpts rw
62 61 0:26 / /dev/pts rw,relatime - devpts devpts rw
71 43 0:51 / /mnt/my\\040data rw,relatime - ext4 /dev/vdb rw
63 45 0:39 / /proc rw,nosuid,nodev,noexec,relatime - proc proc rw
"""


def test_reachable_mounts_parents_first() -> None:
    assert visible_mount_points(MOUNTINFO) == [
        "/",
        "/dev",
        "/proc",
        "/sys",
        "/dev/pts",
        "/dev/shm",
        "/mnt/my data",
        "/sys/fs/cgroup",
    ]


def test_mounts_under_a_covered_mount_are_skipped() -> None:
    assert "/proc/sys/fs/binfmt_misc" not in visible_mount_points(MOUNTINFO)


def test_arguments_with_and_without_a_view() -> None:
    assert parse(["--workdir", "/w", "--", "true"]) == ("/w", None, [], ["true"])
    assert parse(["--workdir", "/w", "--view", "/usr", "--view", "/lib", "--", "nvcc", "-c"]) == (
        "/w",
        None,
        ["/usr", "/lib"],
        ["nvcc", "-c"],
    )
    assert parse(["--workdir", "/w", "--stage", "/s", "--view", "/usr", "--", "true"]) == (
        "/w",
        "/s",
        ["/usr"],
        ["true"],
    )
    assert parse(["--workdir", "/w", "--stage", "/s", "--", "true"]) is None  # a stage is only for a view
    assert parse(["--workdir", "/w", "--view", "/usr", "true"]) is None
    assert parse(["--view", "/usr", "--", "true"]) is None


class _Umounts:
    def __init__(self) -> None:
        self.paths: list[bytes] = []

    def umount2(self, path: bytes, flags: int) -> int:
        self.paths.append(path)
        return 0


def test_a_refused_step_takes_the_kept_proc_down_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the read-only remount is refused, the tmpfs (and the /proc bind in it) is unmounted: a writable
    /proc within the worker's reach would undo the read-only covers of /proc/sys and sysrq-trigger."""
    mounts: list[tuple[Any, ...]] = []

    def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        if flags & jail.MS_REMOUNT:
            raise OSError(1, "remount refused")
        mounts.append((source, target, fstype))

    umounts = _Umounts()
    monkeypatch.setattr(jail, "_mount", mount)
    monkeypatch.setattr(jail, "_libc", umounts)
    jail.keep_proc_for_nested_jails(str(tmp_path))
    holder = str(tmp_path / jail.NESTED_PROC)
    assert mounts == [("tmpfs", holder, "tmpfs"), ("/proc", holder + "/proc", None)]
    assert umounts.paths == [holder.encode()]


def test_a_refused_tmpfs_leaves_the_worker_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> None:
        raise OSError(1, "no tmpfs here")

    umounts = _Umounts()
    monkeypatch.setattr(jail, "_mount", refuse)
    monkeypatch.setattr(jail, "_libc", umounts)
    jail.keep_proc_for_nested_jails(str(tmp_path))  # no exception: the jail goes on without it
    assert umounts.paths == []
