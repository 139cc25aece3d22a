"""Fenced code blocks in a model's answer (```lang … ```), shared by the proposer and the generator."""

from __future__ import annotations

import re
from dataclasses import dataclass

_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.#-]*)[^`\n]*$")


@dataclass(frozen=True)
class FencedBlock:
    language: str  # lower-cased info string ("" when none)
    body: str  # the lines between the fences, ending in one newline
    closed: bool  # False when the answer ended inside the block (cut off at max_tokens?)


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced code block of ``text`` in order; an unclosed last block runs to the end.

    A block closes at a line of the same fence character at least as long as its opening fence,
    so a ```` ```` ```` fence can quote ``` inside it. CRLF line ends are accepted.
    """
    blocks: list[FencedBlock] = []
    lines = text.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if opened is None:
            i += 1
            continue
        fence = opened.group("fence")
        closing = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$")
        end = next((j for j in range(i + 1, len(lines)) if closing.match(lines[j])), None)
        body = lines[i + 1 : end if end is not None else len(lines)]
        blocks.append(FencedBlock(opened.group("lang").lower(), "\n".join(body).strip("\n") + "\n", end is not None))
        i = (end if end is not None else len(lines)) + 1
    return blocks
