"""Which task files a suite is: a folder (a KernelBench level folder as it is), a glob, or a list file."""

from __future__ import annotations

import fnmatch
import glob
from pathlib import Path

from optiml.errors import OptimlError


def discover_suite(spec: str, only: str | None = None) -> list[Path]:
    """Task files of ``spec``, sorted; ``only`` keeps those whose stem matches a comma-separated list of
    globs or substrings (``--tasks softmax,*norm*``). Raises OptimlError when nothing is found."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
    elif path.is_file() and path.suffix != ".py":
        files = _list_file(path)
    elif path.is_file():
        files = [path]
    else:
        files = sorted(Path(p) for p in glob.glob(spec) if p.endswith(".py"))
    if not files:
        raise OptimlError(f"{spec}: no task files (give a folder of KernelBench files, a glob, or a list file)")
    if only:
        patterns = [p.strip() for p in only.split(",") if p.strip()]
        files = [f for f in files if any(fnmatch.fnmatch(f.stem, p) or p in f.stem for p in patterns)]
        if not files:
            raise OptimlError(f"{spec}: no task matches --tasks {only!r}")
    return files


def _list_file(path: Path) -> list[Path]:
    """One task path a line (relative to the list file); blank lines and ``#`` comments are skipped."""
    files = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        entry = line.split("#", 1)[0].strip()
        if not entry:
            continue
        task = (path.parent / entry).resolve() if not Path(entry).is_absolute() else Path(entry)
        if not task.is_file():
            raise OptimlError(f"{path}:{number}: no such task file {entry}")
        files.append(task)
    return files
