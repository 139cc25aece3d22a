"""Reading a file that an untrusted process could have written or replaced.

A candidate (or a judge a candidate reached) may swap a file the orchestrator reads later — its
stderr file, say — for a link to ``/proc/self/environ`` or a secret, or for a FIFO that blocks
the reader, or grow it without bound. :func:`read_tail` therefore opens the file by a plain name
*relative to a directory handle* taken when the directory was made (a swapped directory or a link
on the way leads nowhere), never follows a final link (``O_NOFOLLOW``), never blocks
(``O_NONBLOCK``), accepts only a regular file with one link (a hard link to another file is
refused), and reads at most ``limit`` bytes from its end. Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat

DEFAULT_LIMIT = 64 * 1024
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class UnsafeFile(OSError):
    """The file is not a plain, singly linked regular file: it was replaced, so it is not read."""


def open_directory(path: str | os.PathLike[str]) -> int:
    """A handle on directory ``path`` (not through a final link), for :func:`read_tail` later."""
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def read_tail(directory: int, name: str, limit: int = DEFAULT_LIMIT) -> bytes:
    """The last ``limit`` bytes of file ``name`` in the directory handle ``directory``.

    Raises :class:`UnsafeFile` for anything but a regular file with one link, ``OSError`` when it is
    missing (or is a link: ``ELOOP``), ``ValueError`` for a name with a ``/``.
    """
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a plain file name: {name!r}")
    fd = os.open(name, _OPEN_FLAGS, dir_fd=directory)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            raise UnsafeFile(f"{name} is not a plain file any more (mode {oct(info.st_mode)}, {info.st_nlink} links)")
        start = max(0, info.st_size - limit)
        return os.pread(fd, limit, start)
    finally:
        os.close(fd)


def tail_text(directory: int | None, name: str, lines: int, limit: int = DEFAULT_LIMIT) -> str:
    """The last ``lines`` non-empty lines of :func:`read_tail`, joined by ``" | "``; a file that is
    missing or was replaced gives a short note instead (never its contents)."""
    if directory is None:
        return ""
    try:
        raw = read_tail(directory, name, limit)
    except UnsafeFile:
        return f"({name} was replaced by something other than a plain file: not read)"
    except OSError as exc:
        return f"({name} was replaced by a link: not read)" if exc.errno == errno.ELOOP else ""
    text = raw.decode(errors="replace").replace("\x00", " ")
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " | ".join(kept[-lines:])
