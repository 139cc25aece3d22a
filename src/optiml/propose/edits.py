"""SEARCH/REPLACE blocks: the edit format proposers use, and applying any :class:`Edit` to a kernel.

A block replaces one exact run of lines of the current source::

    <<<<<<< SEARCH
    for (int64_t j = 0; j < n; ++j) acc += xr[j];
    =======
    #pragma unroll 4
    for (int64_t j = 0; j < n; ++j) acc += xr[j];
    >>>>>>> REPLACE

Parsing tolerates what models do to it: Markdown fences around or inside blocks, CRLF line ends,
5 to 9 marker characters, a missing space before ``SEARCH``. Applying tries an exact match first,
then a match that ignores trailing whitespace, then one that ignores indentation (re-indenting the
replacement). A SEARCH that matches nowhere, or in more than one place, is an error naming the
block and the nearest line of the kernel, so a model can fix its answer on retry.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from optiml.kernel.source import KernelSource
from optiml.propose.errors import EditApplyError, EditParseError
from optiml.propose.knobs import parse_knob_payload, set_knob
from optiml.task import Task
from optiml.values import Edit

SEARCH_MARK = "<<<<<<< SEARCH"
DIVIDER = "======="
REPLACE_MARK = ">>>>>>> REPLACE"
EDIT_KINDS = ("search_replace", "full_source", "knob", "flags", "template")

_SEARCH_LINE = re.compile(r"^\s*<{5,9}\s*SEARCH\b.*$")
_DIVIDER_LINE = re.compile(r"^\s*={5,9}\s*$")
_REPLACE_LINE = re.compile(r"^\s*>{5,9}\s*REPLACE\b.*$")
_FENCE_LINE = re.compile(r"^\s*(```|~~~)[\w+.#-]*\s*$")


@dataclass(frozen=True)
class SearchReplace:
    """One block: replace the lines ``search`` with the lines ``replace``.

    Each is a run of whole lines, each ending in a newline (a final one may be left off), so
    ``""`` is no lines and ``"\\n"`` is one empty line.
    """

    search: str
    replace: str

    @property
    def search_lines(self) -> list[str]:
        return _as_lines(self.search)

    @property
    def replace_lines(self) -> list[str]:
        return _as_lines(self.replace)


def _as_lines(text: str) -> list[str]:
    if not text:
        return []
    return (text[:-1] if text.endswith("\n") else text).split("\n")


def _as_text(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def has_blocks(text: str) -> bool:
    """True when ``text`` contains at least one SEARCH marker line."""
    return any(_SEARCH_LINE.match(line) for line in _lines(text))


def parse_blocks(text: str) -> list[SearchReplace]:
    """Every block in ``text``; :class:`EditParseError` naming the first malformed block."""
    blocks: list[SearchReplace] = []
    state, search, replace = "outside", list[str](), list[str]()
    number = 0
    for line in _lines(text):
        if _SEARCH_LINE.match(line):
            if state != "outside":
                raise EditParseError(f"block {number} has no '{REPLACE_MARK}' line before the next SEARCH")
            state, search, replace = "search", [], []
            number += 1
        elif _DIVIDER_LINE.match(line) and state == "search":
            state = "replace"
        elif _REPLACE_LINE.match(line):
            if state != "replace":
                where = f"block {number}" if state == "search" else f"a '{REPLACE_MARK}' line after block {number}"
                raise EditParseError(f"{where} has no '{DIVIDER}' line between SEARCH and REPLACE")
            blocks.append(SearchReplace(_as_text(search), _as_text(replace)))
            state = "outside"
        elif state in ("search", "replace") and not _FENCE_LINE.match(line):
            (search if state == "search" else replace).append(line)
    if state != "outside":
        missing = DIVIDER if state == "search" else REPLACE_MARK
        raise EditParseError(f"block {number} is incomplete (no '{missing}' line; was the answer cut off?)")
    for index, block in enumerate(blocks, 1):
        if not block.search.strip():
            raise EditParseError(f"block {index} has an empty SEARCH section; quote the lines to replace")
    return blocks


def render_blocks(blocks: Sequence[SearchReplace]) -> str:
    """The canonical text of blocks (the payload of a ``search_replace`` Edit)."""
    return "".join(
        f"{SEARCH_MARK}\n{_as_text(b.search_lines)}{DIVIDER}\n{_as_text(b.replace_lines)}{REPLACE_MARK}\n"
        for b in blocks
    )


def apply_blocks(source: str, blocks: Sequence[SearchReplace]) -> str:
    """Apply blocks in order; :class:`EditApplyError` names the block that does not fit and why."""
    if not blocks:
        raise EditApplyError("the edit contains no SEARCH/REPLACE blocks")
    newline = "\r\n" if "\r\n" in source else "\n"
    lines = source.replace("\r\n", "\n").split("\n")
    for index, block in enumerate(blocks, 1):
        lines = _apply_one(lines, block, index)
    return newline.join(lines)


def _apply_one(lines: list[str], block: SearchReplace, index: int) -> list[str]:
    quoted = block.search_lines
    replace = block.replace_lines
    search = _trim_blank_edges(quoted)
    attempts: list[tuple[list[str], list[str], Callable[[str], str]]] = [(quoted, replace, _same)]
    if search:
        trimmed = _trim_like(replace, quoted, search)
        attempts += [(search, trimmed, normalise) for normalise in (_same, _rstrip, _strip)]
    for target, new, normalise in attempts:
        hits = _find(lines, target, normalise)
        if len(hits) > 1:
            shown = ", ".join(str(h + 1) for h in hits[:5])
            raise EditApplyError(
                f"block {index}: SEARCH text matches {len(hits)} places (lines {shown}); "
                "include more surrounding lines so it matches exactly one"
            )
        if hits:
            start = hits[0]
            if normalise is _strip:
                new = _reindent(new, target, lines[start])
            return lines[:start] + new + lines[start + len(target) :]
    raise EditApplyError(
        f"block {index}: SEARCH text not found in the current kernel; {_nearest(lines, search or quoted)}"
    )


def _same(line: str) -> str:
    return line


def _rstrip(line: str) -> str:
    return line.rstrip()


def _strip(line: str) -> str:
    return line.strip()


def _find(lines: list[str], search: list[str], normalise: Callable[[str], str]) -> list[int]:
    target = [normalise(s) for s in search]
    haystack = [normalise(s) for s in lines]
    width = len(target)
    return [i for i in range(len(haystack) - width + 1) if haystack[i : i + width] == target]


def _trim_blank_edges(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


def _trim_like(replace: list[str], quoted: list[str], search: list[str]) -> list[str]:
    """Drop from ``replace`` the blank edge lines that were trimmed from the SEARCH text."""
    lead = next((i for i, line in enumerate(quoted) if line.strip()), 0)
    trail = len(quoted) - lead - len(search)
    while lead and replace and not replace[0].strip():
        replace, lead = replace[1:], lead - 1
    while trail and replace and not replace[-1].strip():
        replace, trail = replace[:-1], trail - 1
    return replace


def _reindent(replace: list[str], search: list[str], matched_first: str) -> list[str]:
    """Shift the replacement by the indentation difference between the kernel and the SEARCH text."""
    have = _indent(matched_first)
    quoted = _indent(search[0])
    if have == quoted:
        return replace
    out = []
    for line in replace:
        if line.startswith(quoted):
            out.append(have + line[len(quoted) :])
        else:
            out.append(have + line.lstrip() if line.strip() else line)
    return out


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _nearest(lines: list[str], search: list[str]) -> str:
    """Which kernel line the block's first (least ambiguous) line resembles most."""
    probe = max(search[:3], key=lambda s: len(s.strip())).strip()
    best, best_ratio = -1, 0.0
    for i, line in enumerate(lines):
        ratio = difflib.SequenceMatcher(None, probe, line.strip()).ratio() if line.strip() else 0.0
        if ratio > best_ratio:
            best, best_ratio = i, ratio
    if best < 0 or best_ratio < 0.5:
        return f"no line resembles {probe!r}"
    return f"{probe!r} is closest to line {best + 1}: {lines[best].strip()!r}"


def diff_blocks(old: str, new: str, context: int = 1) -> list[SearchReplace]:
    """Blocks that turn ``old`` into ``new`` when applied in order.

    Each hunk gets ``context`` lines around it and grows until its SEARCH text matches exactly
    once in the source as it stands when the block applies; hunks that grow into each other merge.
    """
    a, b = old.replace("\r\n", "\n").split("\n"), new.replace("\r\n", "\n").split("\n")
    opcodes = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()

    def new_index(x: int, pick: Callable[[list[int]], int]) -> int:
        """Where old line boundary ``x`` falls in ``new``: ``min`` before, ``max`` after an insertion there."""
        found = []
        for tag, i1, i2, j1, j2 in opcodes:
            if tag == "equal" and i1 <= x <= i2:
                found.append(j1 + x - i1)
            else:
                found += [j for i, j in ((i1, j1), (i2, j2)) if i == x]
        return pick(found)

    ranges = [[max(i1 - context, 0), min(i2 + context, len(a))] for tag, i1, i2, _j1, _j2 in opcodes if tag != "equal"]
    while True:
        ranges = _merge_ranges(ranges)
        blocks = [
            SearchReplace(_as_text(a[lo:hi]), _as_text(b[new_index(lo, min) : new_index(hi, max)])) for lo, hi in ranges
        ]
        ambiguous = _first_ambiguous(a, blocks)
        if ambiguous is None or ranges[ambiguous] == [0, len(a)]:
            return blocks
        lo, hi = ranges[ambiguous]
        ranges[ambiguous] = [max(lo - 1, 0), min(hi + 1, len(a))]


def _first_ambiguous(lines: list[str], blocks: list[SearchReplace]) -> int | None:
    """Index of the first block whose SEARCH is blank or not unique when its turn comes."""
    for index, block in enumerate(blocks):
        search = block.search_lines
        hits = _find(lines, search, _same)
        if len(hits) != 1 or not any(line.strip() for line in search):
            return index
        lines = lines[: hits[0]] + block.replace_lines + lines[hits[0] + len(search) :]
    return None


def _merge_ranges(ranges: list[list[int]]) -> list[list[int]]:
    merged: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return merged


def apply_edit(kernel: KernelSource, edit: Edit, task: Task | None = None) -> KernelSource:
    """The kernel an edit yields; :class:`optiml.propose.errors.EditError` when it does not apply.
    A ``template`` edit (the structural proposer's) renders ``task``'s plan, so it needs the task."""
    if edit.kind == "search_replace":
        return kernel.with_code(apply_blocks(kernel.code, parse_blocks(edit.payload)))
    if edit.kind == "full_source":
        if "optiml_forward" not in edit.payload:
            raise EditApplyError("the new source does not define optiml_forward")
        return kernel.with_code(edit.payload)
    if edit.kind == "knob":
        name, value = parse_knob_payload(edit.payload)
        return kernel.with_code(set_knob(kernel.code, name, value))
    if edit.kind == "flags":
        return kernel.with_flags(tuple(edit.payload.split()))
    if edit.kind == "template":
        from optiml.propose.structural import apply_template_edit  # the planner, loaded for template edits only

        return apply_template_edit(kernel, edit.payload, task)
    raise EditApplyError(f"unknown edit kind {edit.kind!r}; expected one of {', '.join(EDIT_KINDS)}")


def _lines(text: str) -> list[str]:
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
