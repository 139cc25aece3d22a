"""Inside fresh mount + pid namespaces: make everything read-only but the worker's directory, drop
all capabilities, then run the worker as the child of a minimal init.

Started by :mod:`optiml.integrity.sandbox` as
``unshare [--map-root-user] [--net] --mount --pid --fork --kill-child --mount-proc -- python -I jail.py
--workdir DIR -- ARGV...``. Standard library only, runnable as a plain script (no package import),
because it runs before the worker's environment is in place.

Steps, each fatal on failure (exit 126 with one line on stderr — a half-built jail never runs
a candidate):

1. mounts become private (nothing propagates back to the host);
2. ``DIR`` is bind-mounted onto itself, so it stays writable;
3. ``/dev/shm`` gets a private, size-limited tmpfs (no shared-memory channel to the host);
4. every other mount is remounted read-only (``/proc`` is the fresh one ``--mount-proc`` made,
   whose ``sys``, ``sysrq-trigger``, ``irq`` and ``bus`` become read-only too);
5. capabilities are dropped (bounding, ambient, effective, permitted, inheritable) and
   ``no_new_privs`` is set, so nothing inside can undo the read-only mounts;
6. the worker is forked and exec'd; this process stays as pid 1, forwards SIGTERM/SIGINT/SIGHUP,
   reaps orphans, and exits with the worker's code, or 128 + N when signal N killed it (pid 1
   cannot re-raise a signal on itself).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
CAP_VERSION_3 = 0x20080522
EXIT_JAIL_FAILED = 126
SHM_SIZE = "size=256m,mode=1777"
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_libc = ctypes.CDLL(None, use_errno=True)


def _bytes(text: str | None) -> bytes | None:
    return text.encode() if text is not None else None


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    result = _libc.mount(_bytes(source), _bytes(target), _bytes(fstype), ctypes.c_ulong(flags), _bytes(data))
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"mount {target}: {os.strerror(code)}")


def visible_mount_points(mountinfo: str) -> list[str]:
    """Mount points one can reach by path, parents first.

    A mount is reachable when it is the topmost at its path and no mount on its way to the
    root is covered by another (``--mount-proc`` stacks a new /proc over the old one, and
    mounts under the old /proc must not be touched: their paths now lead elsewhere).
    """
    parents: dict[str, tuple[str, str]] = {}
    top: dict[str, str] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) > 4:
            point = fields[4].encode().decode("unicode_escape")
            parents[fields[0]] = (fields[1], point)
            top[point] = fields[0]

    def reachable(mount: str) -> bool:
        parent, point = parents[mount]
        if top[point] != mount:
            return False
        below = point
        while parent in parents and parent != mount:
            mount, (parent, point) = parent, parents[parent]
            if point != below and top[point] != mount:
                return False
            below = point
        return True

    points = {point for mount, (_, point) in parents.items() if reachable(mount)}
    return sorted(points, key=lambda p: (p.count("/"), p))


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _remount_read_only(path: str) -> None:
    try:
        kept = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.ENOENT, errno.ENOTDIR):
            return  # hidden under another mount or not reachable: nothing to write through
        raise
    _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | kept)


def build_filesystem(workdir: str) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(workdir, workdir, None, MS_BIND | MS_REC)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, SHM_SIZE)
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND)
    for point in visible_mount_points(Path("/proc/self/mountinfo").read_text()):
        if _within(point, workdir) or point == "/dev/shm":
            continue
        if _within(point, "/proc") and not any(_within(point, f"/proc/{n}") for n in PROC_READ_ONLY):
            continue
        _remount_read_only(point)


def drop_privileges() -> None:
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), f"prctl(PR_CAPBSET_DROP, {cap})")
    _libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL on old kernels: none to clear
    header = _CapHeader(CAP_VERSION_3, 0)
    data = (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def supervise(argv: Sequence[str]) -> int:
    """Fork and exec ``argv``; wait for it as init; return its exit status (128 + N for signal N)."""
    child = os.fork()
    if child == 0:
        try:
            os.execvp(argv[0], list(argv))
        except OSError as exc:
            sys.stderr.write(f"optiml jail: cannot run {argv[0]}: {exc.strerror}\n")
        os._exit(127)

    def forward(number: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, number)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        except InterruptedError:
            continue
        if pid == child:
            return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main(args: Sequence[str]) -> int:
    if len(args) < 4 or args[0] != "--workdir" or args[2] != "--":
        sys.stderr.write("usage: jail.py --workdir DIR -- ARGV...\n")
        return 2
    workdir, argv = os.path.realpath(args[1]), args[3:]
    try:
        build_filesystem(workdir)
        drop_privileges()
        os.chdir(workdir)  # the inherited cwd still points into the mount beneath the writable bind
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"optiml jail: {exc}\n")
        return EXIT_JAIL_FAILED
    return supervise(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
