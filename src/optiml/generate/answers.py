"""Pull the code out of a model's answer: a whole CUDA source, or a whole KernelBench task file.

Models wrap code in Markdown fences, add prose around it, sometimes show a fragment before the
full file, and sometimes forget the closing fence (a block left open runs to the end; an answer
cut off by max_tokens is reported by the caller, from the finish reason). The rule: take the
*last* fenced block in a fitting language that has the marker of a whole file
(``optiml_forward`` for a kernel, ``class Model`` and ``get_inputs`` for a task); an answer with
no fences at all is taken whole if it has the marker.
Anything else is a :class:`NoCodeError` whose message is written for the model's repair prompt.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from optiml.generate.errors import GenerationError

_OPEN = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+.#-]*)[^`\n]*$")
_CUDA_LANGS = ("cuda", "cu", "c++", "cpp", "cxx", "cc", "c", "")
_PYTHON_LANGS = ("python", "py", "python3", "")


class NoCodeError(GenerationError):
    """The answer holds no usable code; the message says what was expected."""


@dataclass(frozen=True)
class FencedBlock:
    language: str  # lower-cased info string ("" when none)
    body: str


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced code block of ``text`` in order; an unclosed last block runs to the end."""
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
        blocks.append(FencedBlock(opened.group("lang").lower(), "\n".join(body).strip("\n") + "\n"))
        i = (end if end is not None else len(lines)) + 1
    return blocks


def extract_cuda(text: str) -> str:
    """The complete CUDA source in an answer."""
    return _extract(
        text,
        _CUDA_LANGS,
        lambda code: "optiml_forward" in code,
        "the answer has no ```cuda block with a complete source defining optiml_forward; "
        "give the whole .cu file in one ```cuda block",
    )


def extract_python(text: str) -> str:
    """The complete KernelBench task file in an answer."""
    return _extract(
        text,
        _PYTHON_LANGS,
        lambda code: "class Model" in code and "get_inputs" in code,
        "the answer has no ```python block with a complete task file (class Model, get_inputs, "
        "get_init_inputs); give the whole file in one ```python block",
    )


def _extract(text: str, languages: tuple[str, ...], complete: Callable[[str], bool], expected: str) -> str:
    blocks = fenced_blocks(text)
    fitting = [b for b in blocks if b.language in languages and complete(b.body)]
    if fitting:
        return fitting[-1].body
    if not blocks and complete(text):
        return text.strip() + "\n"
    raise NoCodeError(expected)
