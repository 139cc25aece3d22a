"""Which task files a suite is: a folder with its subfolders (a KernelBench level folder as it is), a glob,
or a list file."""

from __future__ import annotations

import fnmatch
import glob
import re
from pathlib import Path

from optiml.errors import OptimlError


def discover_suite(spec: str, only: str | None = None) -> list[Path]:
    """Task files of ``spec``, sorted; ``only`` keeps those a comma-separated list of names or globs selects
    (``--tasks softmax,*norm*``: see :func:`selects`). Raises OptimlError when nothing is found, or when a
    name or glob selects no task (naming the tasks that contain it)."""
    path = Path(spec)
    if path.is_dir():  # with its subfolders (tasks/ holds memory/ and compute/), hidden and _private ones skipped
        files = sorted(
            p for p in path.rglob("*.py") if not any(part.startswith(("_", ".")) for part in p.relative_to(path).parts)
        )
    elif path.is_file() and path.suffix != ".py":
        files = _list_file(path)
    elif path.is_file():
        files = [path]
    else:
        files = sorted(Path(p) for p in glob.glob(spec) if p.endswith(".py"))
    if not files:
        missing = ": no such folder or file" if not path.exists() and not glob.has_magic(spec) else ""
        raise OptimlError(
            f"{spec}: no task files{missing} (give a folder of KernelBench files, a glob, or a list file)"
        )
    if only:
        patterns = [p.strip() for p in only.split(",") if p.strip()]
        unmatched = [p for p in patterns if not any(selects(p, f.stem) for f in files)]
        if unmatched:
            raise OptimlError(
                f"{spec}: no task matches --tasks {only!r}: {'; '.join(_near(p, files) for p in unmatched)}"
            )
        files = [f for f in files if any(selects(p, f.stem) for p in patterns)]
    return files


_NUMBERED = re.compile(r"\d+_(?P<name>.+)")


def selects(pattern: str, stem: str) -> bool:
    """Whether a ``--tasks`` entry selects the task file named ``stem``: a glob (``*norm*``) by fnmatch, a name
    exactly — the stem, or the stem after KernelBench's number (``relu`` selects ``19_relu``), never a part
    of a longer name (``silu`` does not select ``silu_fp16``)."""
    if glob.has_magic(pattern):
        return fnmatch.fnmatchcase(stem, pattern)
    numbered = _NUMBERED.fullmatch(stem)
    return pattern == stem or (numbered is not None and pattern == numbered["name"])


def _near(pattern: str, files: list[Path]) -> str:
    """What to say of a name that selects nothing: the tasks whose names contain it, if any."""
    near = sorted({f.stem for f in files if pattern.lower() in f.stem.lower()})
    if not near:
        return f"no task is named {pattern!r}"
    shown = ", ".join(near[:5]) + (f" and {len(near) - 5} more" if len(near) > 5 else "")
    return f"no task is named {pattern!r} (names containing it: {shown}; the glob '*{pattern}*' selects them)"


def _list_file(path: Path) -> list[Path]:
    """One task path a line; blank lines and ``#`` comments are skipped. A relative path is read from the list
    file's folder, else from the working directory (where a user who writes the list usually stands)."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise OptimlError(
            f"{path}: not a list of task files (not UTF-8 text, byte {exc.start}); give a folder of KernelBench "
            "files, a glob, or a text file with one task path a line"
        ) from exc
    except OSError as exc:
        raise OptimlError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    files = []
    for number, line in enumerate(text.splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        task = _listed_task(path, entry)
        if task is None:
            where = "" if Path(entry).is_absolute() else f" (looked in {path.parent.resolve()} and {Path.cwd()})"
            raise OptimlError(f"{path}:{number}: no such task file {entry}{where}")
        files.append(task)
    return files


def _listed_task(listing: Path, entry: str) -> Path | None:
    if Path(entry).is_absolute():
        return Path(entry) if Path(entry).is_file() else None
    for base in (listing.parent, Path.cwd()):
        if (base / entry).is_file():
            return (base / entry).resolve()
    return None
