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

from collections.abc import Callable

from optiml.code_blocks import fenced_blocks
from optiml.generate.errors import GenerationError

_CUDA_LANGS = ("cuda", "cu", "c++", "cpp", "cxx", "cc", "c", "")
_PYTHON_LANGS = ("python", "py", "python3", "")


class NoCodeError(GenerationError):
    """The answer holds no usable code; the message says what was expected."""


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
