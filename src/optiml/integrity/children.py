"""End a command's child processes at once, wherever they run (Ctrl-C).

Every tool OptiML starts through the sandbox leads a session of its own (so a timeout can kill its
whole group), and under ``unshare`` its children live in a pid namespace of their own too. A
terminal's Ctrl-C reaches only the terminal's foreground group: the ``optiml`` process itself. So
when a command ends on Ctrl-C, :func:`end_all` kills what the command started — every descendant
of this process, found through ``/proc`` by parent, in whatever group, session or namespace it
runs — and refuses new launches from then on (a compile pool's queued build would start nvcc
again otherwise). Launchers start their processes inside :func:`launching`, which takes the same
lock, so no process starts between the scan and the refusal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

_lock = threading.Lock()
_ending = False


class Ending(KeyboardInterrupt):
    """Raised by :func:`launching` once :func:`end_all` has run: the command is ending."""


def ending() -> bool:
    """Whether :func:`end_all` has run in this process (a launcher's result may be a killed process)."""
    return _ending


@contextlib.contextmanager
def launching() -> Iterator[None]:
    """Held while a child process is started; raises :class:`Ending` once the command is ending."""
    with _lock:
        if _ending:
            raise Ending("the command is ending: no new process is started")
        yield


def end_all() -> int:
    """SIGKILL every descendant of this process (and the groups they lead); refuse launches from now
    on. Returns how many processes were signalled."""
    global _ending
    with _lock:
        _ending = True
        found = descendants(os.getpid())
        own_group = os.getpgrp()
        for pid in found:
            with contextlib.suppress(OSError):
                group = os.getpgid(pid)
                if group != own_group:
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    return len(found)


def descendants(root: int) -> list[int]:
    """The pids of ``root``'s children, their children, and so on (from ``/proc``; empty without it)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()  # after "pid (name) ": state, ppid, ...
        if len(fields) > 1:
            parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    todo = list(parents.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def resident_bytes(root: int) -> int:
    """The resident memory of ``root`` and all its descendants together (0 where ``/proc`` is missing)."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in (root, *descendants(root)):
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return total
