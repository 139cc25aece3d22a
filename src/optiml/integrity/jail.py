"""Inside fresh mount + pid namespaces: make everything read-only but the worker's directory, drop
all capabilities, then run the worker as the child of a minimal init.

Started by :mod:`optiml.integrity.sandbox` as
``unshare [--map-root-user] [--net] --mount --pid --fork --kill-child --mount-proc -- python -I jail.py
--workdir DIR [--view PATH]... -- ARGV...``. Standard library only, runnable as a plain script (no
package import), because it runs before the worker's environment is in place.

Without ``--view`` the jail keeps the whole filesystem readable (the GPU worker needs Python, torch
and the task files). With ``--view`` (the compiler's jail) the process gets a new root holding only
the listed paths, read-only, plus ``DIR`` (writable), a private ``/tmp`` and ``/dev/null``,
``/dev/zero``, ``/dev/random``, ``/dev/urandom``: everything else — ``/etc/passwd``, home folders,
other candidates, ``/proc`` — does not exist, so ``#include "/etc/passwd"`` or ``.incbin`` of a
secret fails with "no such file". A listed symlink is recreated as a symlink and its target listed too.
A path listed as ``?PATH`` is optional: where it cannot be mounted it stays an empty folder. ``/proc`` itself
listed is never the host's: it is a fresh ``proc`` of the jail's own pid namespace (its own processes only,
writable where a process may write about itself, such as a thread's name) — what CUDA's driver needs to start.

With ``--stage STAGE`` as well (a candidate process's jail, :mod:`optiml.evaluate.candidate_link`),
the judge made the new root's folders and mount points beforehand (:func:`prepare_stage`): the jail
then runs in a user namespace that has no uid mapping — a process that dropped its capabilities
(the judge, inside its own jail) may create one but not map uid 0 into it — where nothing can be
created, only mounted; its ``/tmp`` is an empty read-only folder.

Steps, each fatal on failure (exit 126 with one line on stderr — a half-built jail never runs
a candidate):

1. mounts become private (nothing propagates back to the host);
2. ``DIR`` is bind-mounted onto itself, so it stays writable; ``DIR/.optiml-proc`` holds a bind of the
   fresh ``/proc`` with nothing mounted over it, behind a folder of mode 000 on a read-only tmpfs
   (:func:`keep_proc_for_nested_jails`, best effort: a candidate's jail, nested in this one, may mount a
   ``/proc`` of its own only where a ``/proc`` without covered parts is mounted here; the worker cannot reach it);
3. ``/dev/shm`` gets a private, size-limited tmpfs (no shared-memory channel to the host);
4. every other mount is remounted read-only (``/proc`` is the fresh one ``--mount-proc`` made,
   whose ``sys``, ``sysrq-trigger``, ``irq`` and ``bus`` become read-only too);
5. capabilities are dropped (bounding, ambient, effective, permitted, inheritable) and
   ``no_new_privs`` is set, so nothing inside can undo the read-only mounts;
   (with ``--view``: 2–4 are replaced by the new root, entered with ``pivot_root``;)
6. the worker is forked and exec'd; this process stays as pid 1, forwards SIGTERM/SIGINT/SIGHUP,
   reaps orphans, and exits with the worker's code, or 128 + N when signal N killed it (pid 1
   cannot re-raise a signal on itself).
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import sys

TYPE_CHECKING = False  # no typing import at run time: every compile and worker start pays this script's imports
if TYPE_CHECKING:
    from collections.abc import Sequence

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
VIEW_STAGE = ".optiml-root"  # inside DIR: where the new root is assembled before pivot_root
VIEW_DEVICES = ("null", "zero", "random", "urandom")
OPTIONAL = "?"  # a --view path with this prefix is exposed where the kernel allows it, skipped where not
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "ppc64le": 203}  # syscall numbers (glibc has no wrapper)
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
CAP_VERSION_3 = 0x20080522
EXIT_JAIL_FAILED = 126
SHM_SIZE = "size=256m,mode=1777"
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus")
#: a --view of exactly this path mounts a procfs of the jail's pid namespace, never the host's /proc
OWN_PROC = "/proc"
NESTED_PROC = ".optiml-proc"  # inside DIR: the bind of /proc that lets a nested jail mount a /proc of its own
_FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_libc = ctypes.CDLL(None, use_errno=True)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as file:
        return file.read()


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


def keep_proc_for_nested_jails(workdir: str) -> None:
    """A bind of ``/proc`` (before anything is mounted over its parts) at ``DIR/NESTED_PROC/proc``.

    The kernel lets a user namespace mount a new ``proc`` only where a ``proc`` is already mounted in full
    view; ``/proc`` itself will have ``sys``, ``sysrq-trigger``, ``irq`` and ``bus`` covered by read-only
    binds, so without this bind a candidate's jail could not give the candidate a ``/proc`` of its own
    (and CUDA does not start without one). The bind sits in a folder of mode 000 on a tmpfs that is made
    read-only: once its capabilities are dropped, the worker cannot enter, chmod or unmount it, so it
    cannot write the host's ``sysrq-trigger`` or sysctls through it.

    Best effort: where a step is refused, whatever was mounted is taken down again and the worker runs as
    before (a nested jail then finds no ``/proc`` to mount, and its candidate runs unconfined, said)."""
    holder = os.path.join(workdir, NESTED_PROC)
    try:
        os.makedirs(holder, exist_ok=True)
        _mount("tmpfs", holder, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0000,size=16k")
    except OSError:
        return
    try:
        inside = os.path.join(holder, "proc")
        os.mkdir(inside)
        _mount("/proc", inside, None, MS_BIND)
        _mount(None, holder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0000")
    except OSError:
        _libc.umount2(_bytes(holder), MNT_DETACH)  # the bind with it: never a writable /proc within reach


def build_filesystem(workdir: str) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount(workdir, workdir, None, MS_BIND | MS_REC)
    keep_proc_for_nested_jails(workdir)
    if os.path.isdir("/dev/shm"):
        _mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, SHM_SIZE)
    for name in PROC_READ_ONLY:
        path = f"/proc/{name}"
        if os.path.exists(path):
            _mount(path, path, None, MS_BIND)
    for point in visible_mount_points(_read("/proc/self/mountinfo")):
        if _within(point, workdir) or point == "/dev/shm":
            continue
        if _within(point, "/proc") and not any(_within(point, f"/proc/{n}") for n in PROC_READ_ONLY):
            continue
        _remount_read_only(point)


def _place(stage: str, path: str) -> str:
    """``path`` inside the staged root, with its parent folders made."""
    inside = stage + path
    os.makedirs(os.path.dirname(inside), exist_ok=True)
    return inside


def _bind_read_only(source: str, target: str) -> None:
    _mount(source, target, None, MS_BIND | MS_REC)
    kept = os.statvfs(source).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | kept)


def expose(stage: str, path: str, seen: set[str] | None = None, mount: bool = True) -> None:
    """Make ``path`` (absolute) visible read-only at the same place in the staged root.

    Parents are resolved first, so ``/lib/x`` on a merged-/usr system lands in ``/usr/lib/x``; a
    symlink is recreated and its target exposed too; a missing path is skipped. With ``mount`` off
    only the mount points are made (:func:`prepare_stage`).
    """
    seen = set() if seen is None else seen
    parent = os.path.realpath(os.path.dirname(path.rstrip("/")) or "/")
    path = os.path.join(parent, os.path.basename(path.rstrip("/"))) if path.rstrip("/") else "/"
    if path in seen or path == "/":
        return
    seen.add(path)
    if os.path.islink(path):
        target = os.readlink(path)
        inside = _place(stage, path)
        if not os.path.lexists(inside):
            os.symlink(target, inside)
        expose(stage, os.path.normpath(os.path.join(parent, target)), seen, mount)
    elif os.path.isdir(path):
        inside = _place(stage, path)
        os.makedirs(inside, exist_ok=True)
        if mount:
            _bind_read_only(path, inside)
    elif os.path.exists(path):
        inside = _place(stage, path)
        _touch(inside)
        if mount:
            _bind_read_only(path, inside)


def _touch(path: str) -> None:
    if not os.path.lexists(path):
        with open(path, "w", encoding="utf-8"):
            pass


def _pivot_root(new_root: str, put_old: str) -> None:
    machine = os.uname().machine
    number = _PIVOT_ROOT.get(machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"pivot_root: unknown syscall number on {machine}")
    if _libc.syscall(ctypes.c_long(number), _bytes(new_root), _bytes(put_old)) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"pivot_root: {os.strerror(code)}")


def build_view(workdir: str, paths: Sequence[str], stage: str | None = None) -> None:
    """Replace the root by one that holds only ``paths`` (read-only) and ``workdir`` (writable).

    Without ``stage`` the new root is assembled on a tmpfs inside ``workdir``, with a private ``/tmp``.
    With ``stage`` it is assembled over mount points that :func:`prepare_stage` made there beforehand
    (a candidate process's jail: in a user namespace without a uid mapping, nothing can be created,
    only mounted), and ``/tmp`` is an empty, read-only folder holding only the way to ``workdir``.
    """
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    if stage is None:
        stage = os.path.join(workdir, VIEW_STAGE)
        os.makedirs(stage, exist_ok=True)
        _mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
        # the private /tmp first: a listed path under /tmp (a checkout there) is then bound on top of it
        tmp = _place(stage, "/tmp")
        os.makedirs(tmp, exist_ok=True)
        _mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, SHM_SIZE)
        staged = False
    else:
        _mount(stage, stage, None, MS_BIND)  # pivot_root needs the new root to be a mount point
        staged = True
    lay_out(stage, workdir, paths, mount=True)
    old = os.path.join(stage, ".old")
    os.makedirs(old, exist_ok=True)
    _pivot_root(stage, old)
    os.chdir("/")
    if _libc.umount2(b"/.old", MNT_DETACH) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"umount /.old: {os.strerror(code)}")
    if staged:  # the root is a bind of the judge's folder: remount the bind, never its filesystem
        kept = os.statvfs("/").f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)
        _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)
    else:
        os.rmdir("/.old")
        _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def lay_out(stage: str, workdir: str, paths: Sequence[str], mount: bool) -> None:
    """The listed paths, the standard devices and ``workdir`` at their places under ``stage``
    (mounted, or with ``mount`` off only their mount points made)."""
    seen: set[str] = set()
    for listed in paths:
        optional = listed.startswith(OPTIONAL)  # shown where it can be, left out (empty) where not
        path = listed.removeprefix(OPTIONAL)
        if not os.path.isabs(path):
            raise ValueError(f"--view {listed}: not an absolute path")
        try:
            if path.rstrip("/") == OWN_PROC:
                mount_own_proc(stage, mount)
            else:
                expose(stage, path, seen, mount)
        except OSError:
            if not optional:
                raise
    for name in VIEW_DEVICES:
        device = f"/dev/{name}"
        if os.path.exists(device):
            target = _place(stage, device)
            _touch(target)
            if mount:
                _mount(device, target, None, MS_BIND)
    inside = _place(stage, workdir)  # last: DIR may lie under /tmp or under an exposed path
    os.makedirs(inside, exist_ok=True)
    if mount:
        _mount(workdir, inside, None, MS_BIND)  # not recursive: the staged root stays out of its own view


def mount_own_proc(stage: str, mount: bool) -> None:
    """A ``proc`` of this process's pid namespace at ``/proc`` under ``stage`` (with ``mount`` off, only its
    mount point). Not read-only: the CUDA driver (570 series on) names its threads through
    ``/proc/self/task/TID/comm`` and fails its start with error 304 where it cannot."""
    inside = _place(stage, OWN_PROC)
    os.makedirs(inside, exist_ok=True)
    if mount:
        _mount("proc", inside, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def prepare_stage(stage: str, workdir: str, paths: Sequence[str]) -> None:
    """Make, as the caller (outside any namespace), every folder, file and link the view of
    ``paths`` and ``workdir`` needs under ``stage``, so a jail started with ``--stage`` only mounts."""
    os.makedirs(stage, exist_ok=True)
    lay_out(stage, os.path.realpath(workdir), paths, mount=False)
    os.makedirs(os.path.join(stage, ".old"), exist_ok=True)


def last_capability() -> int:
    """The highest capability number this kernel knows (read before ``/proc`` leaves the view)."""
    return int(_read("/proc/sys/kernel/cap_last_cap"))


def drop_privileges(last: int) -> None:
    if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
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
        try:  # noqa: SIM105 (contextlib would add its imports to every sandbox start)
            os.kill(child, number)
        except ProcessLookupError:
            pass

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


def parse(args: Sequence[str]) -> tuple[str, str | None, list[str], list[str]] | None:
    """``(workdir, stage, view paths, argv)`` from ``--workdir DIR [--stage S] [--view PATH]... -- ARGV...``,
    None if malformed."""
    if len(args) < 4 or args[0] != "--workdir":
        return None
    workdir, rest, view = args[1], list(args[2:]), []
    stage = None
    if len(rest) >= 2 and rest[0] == "--stage":
        stage, rest = os.path.realpath(rest[1]), rest[2:]
    while len(rest) >= 2 and rest[0] == "--view":
        view.append(rest[1])
        rest = rest[2:]
    if len(rest) < 2 or rest[0] != "--" or (stage is not None and not view):
        return None
    return os.path.realpath(workdir), stage, view, rest[1:]


def main(args: Sequence[str]) -> int:
    parsed = parse(args)
    if parsed is None:
        sys.stderr.write("usage: jail.py --workdir DIR [--stage STAGE] [--view PATH]... -- ARGV...\n")
        return 2
    workdir, stage, view, argv = parsed
    try:
        last = last_capability()
        if view:
            build_view(workdir, view, stage)
        else:
            build_filesystem(workdir)
        drop_privileges(last)
        os.chdir(workdir)  # the inherited cwd still points into the mount beneath the writable bind
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"optiml jail: {exc}\n")
        return EXIT_JAIL_FAILED
    return supervise(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
