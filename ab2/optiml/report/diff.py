"""The source diff of one edit: unified-diff lines tagged for the page (added, removed, hunk, context)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from optiml.kernel.source import KernelSource

#: Context lines around each change.
CONTEXT = 3


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "add" | "del" | "hunk" | "ctx"
    text: str


@dataclass(frozen=True)
class SourceDiff:
    lines: tuple[DiffLine, ...]
    added: int
    removed: int
    flags_before: tuple[str, ...]
    flags_after: tuple[str, ...]

    @property
    def flags_changed(self) -> bool:
        return self.flags_before != self.flags_after

    @property
    def empty(self) -> bool:
        return not self.lines and not self.flags_changed


def source_diff(before: KernelSource, after: KernelSource) -> SourceDiff:
    """What ``after`` changed in ``before``: its code as a unified diff, and its nvcc flags."""
    lines: list[DiffLine] = []
    added = removed = 0
    raw = difflib.unified_diff(before.code.splitlines(), after.code.splitlines(), lineterm="", n=CONTEXT)
    for line in raw:
        if line.startswith(("---", "+++")):
            continue
        if line.startswith("@@"):
            lines.append(DiffLine("hunk", line))
        elif line.startswith("+"):
            added += 1
            lines.append(DiffLine("add", line[1:]))
        elif line.startswith("-"):
            removed += 1
            lines.append(DiffLine("del", line[1:]))
        else:
            lines.append(DiffLine("ctx", line[1:]))
    return SourceDiff(tuple(lines), added, removed, before.flags, after.flags)
