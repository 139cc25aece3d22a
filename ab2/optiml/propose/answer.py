"""Reading a model's answer: rationale, optimisation category, and the edit.

The prompt asks for::

    RATIONALE: <the bottleneck, the evidence, why the change helps>
    CATEGORY: <one of optiml.propose.base.CATEGORIES>
    EDIT:
    <SEARCH/REPLACE blocks, or one ```cuda block holding the complete new file>

Models drift from that, so the reader is lenient where meaning is clear (Markdown headings or bold
labels, synonyms such as "memory coalescing", prose instead of a RATIONALE line, fences around
blocks) and strict where guessing could produce a wrong kernel: an unclosed block or code fence (a
cut-off answer) or a missing edit is an :class:`EditParseError` whose message is sent back to the
model on retry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from optiml.code_blocks import fenced_blocks
from optiml.propose.base import CATEGORIES
from optiml.propose.edits import has_blocks, parse_blocks, render_blocks
from optiml.propose.errors import EditParseError

_LABEL = r"^[ \t#>*_-]*{name}[ \t*_]*:?[ \t*_]*"
_RATIONALE = re.compile(
    _LABEL.format(name="rationale")
    + r"(?P<text>.*?)(?="
    + _LABEL.format(name="(?:category|edit)")
    + r"|^\s*<{5,9}|^\s*```|\Z)",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)
_CATEGORY = re.compile(_LABEL.format(name="category") + r"(?P<text>[^\n]+)", re.IGNORECASE | re.MULTILINE)
_SYNONYMS = {
    "tile": "tiling",
    "blocking": "tiling",
    "vector": "vectorization",
    "vectorize": "vectorization",
    "vectorized_loads": "vectorization",
    "vectorisation": "vectorization",
    "coalesce": "coalescing",
    "memory_coalescing": "coalescing",
    "unroll": "unrolling",
    "loop_unrolling": "unrolling",
    "warp_level_reduction": "warp_reduction",
    "warp_shuffle": "warp_reduction",
    "warp_reduce": "warp_reduction",
    "smem": "shared_memory",
    "launch_configuration": "launch_config",
    "launch": "launch_config",
    "compiler": "compiler_flags",
    "flags": "compiler_flags",
    "tensor_core": "tensor_cores",
    "kernel_fusion": "fusion",
}
MAX_RATIONALE_CHARS = 1200


@dataclass(frozen=True)
class ParsedAnswer:
    rationale: str
    category: str
    kind: str  # "search_replace" | "full_source"
    payload: str  # canonical blocks, or the complete new source


def parse_answer(text: str) -> ParsedAnswer:
    """Rationale, category and edit of one answer; :class:`EditParseError` when it holds no usable edit."""
    text = text.replace("\r\n", "\n")
    if has_blocks(text):
        kind, payload = "search_replace", render_blocks(parse_blocks(text))
    else:
        kind, payload = "full_source", _whole_source(text)
    return ParsedAnswer(rationale=_rationale(text), category=_category(text), kind=kind, payload=payload)


def unparsed_answer(text: str) -> ParsedAnswer:
    """What can be read from an unusable answer, with the raw text as payload (never raises)."""
    kind = "search_replace" if has_blocks(text) else "full_source"
    return ParsedAnswer(rationale=_rationale(text), category=_category(text), kind=kind, payload=text)


def _whole_source(text: str) -> str:
    found = fenced_blocks(text)
    blocks = [b.body for b in found if b.closed]
    with_entry = [b for b in blocks if "optiml_forward" in b]
    if with_entry:
        return with_entry[-1].strip("\n") + "\n"  # the last one is the final version when a model repeats itself
    if any(not b.closed for b in found):
        raise EditParseError("the code block is not closed with ``` (was the answer cut off?)")
    if blocks:
        raise EditParseError(
            "the code block does not define optiml_forward: send the complete kernel file, or SEARCH/REPLACE blocks"
        )
    raise EditParseError(
        "no edit found: answer with SEARCH/REPLACE blocks, or one ```cuda block holding the complete new kernel file"
    )


def _rationale(text: str) -> str:
    match = _RATIONALE.search(text)
    rationale = match.group("text") if match else _prose_before_edit(text)
    rationale = " ".join(rationale.split())
    if len(rationale) > MAX_RATIONALE_CHARS:
        rationale = rationale[: MAX_RATIONALE_CHARS - 1] + "…"
    return rationale or "(no rationale given)"


def _prose_before_edit(text: str) -> str:
    cut = len(text)
    for pattern in (r"^\s*<{5,9}", r"^\s*```", r"^\s*~~~", _LABEL.format(name="(?:category|edit)")):
        found = re.search(pattern, text, re.IGNORECASE | re.MULTILINE)
        if found:
            cut = min(cut, found.start())
    return text[:cut]


def _category(text: str) -> str:
    match = _CATEGORY.search(text)
    return normalize_category(match.group("text")) if match else "other"


def normalize_category(raw: str) -> str:
    """A model's category as one of :data:`CATEGORIES` where it clearly means one, else cleaned free text."""
    words = re.sub(r"[^a-z0-9]+", "_", raw.lower().split("(")[0].split(",")[0]).strip("_")
    words = _SYNONYMS.get(words, words)
    if words in CATEGORIES:
        return words
    for category in CATEGORIES:
        if category in words:
            return category
    return words[:40] or "other"
