"""Reading model answers: rationale, category, SEARCH/REPLACE or whole-source edits, and bad answers."""

from __future__ import annotations

import pytest
from propose_helpers import TASKS

from optiml.propose.answer import normalize_category, parse_answer, unparsed_answer
from optiml.propose.edits import apply_blocks, parse_blocks
from optiml.propose.errors import EditParseError

SILU = (TASKS / "silu.naive.cu").read_text()

SEARCH_REPLACE = """RATIONALE: The kernel is memory bound with one scalar load in flight per thread.
Doubling the block size raises occupancy.
CATEGORY: launch configuration
EDIT:
```cuda
<<<<<<< SEARCH
#define BLOCK_SIZE 256  // threads per block
=======
#define BLOCK_SIZE 512  // threads per block
>>>>>>> REPLACE
```
"""


def test_search_replace_answer() -> None:
    parsed = parse_answer(SEARCH_REPLACE)
    assert parsed.kind == "search_replace"
    assert parsed.category == "launch_config"
    assert parsed.rationale == (
        "The kernel is memory bound with one scalar load in flight per thread. "
        "Doubling the block size raises occupancy."
    )
    assert "#define BLOCK_SIZE 512" in apply_blocks(SILU, parse_blocks(parsed.payload))


def test_whole_source_answer_in_markdown_style() -> None:
    new_source = SILU.replace("expf(-v)", "__expf(-v)")
    answer = f"**Rationale:** use the fast exponential.\n\n**Category:** Compute\n\n```cuda\n{new_source}```\n"
    parsed = parse_answer(answer)
    assert parsed.kind == "full_source" and parsed.payload == new_source
    assert parsed.rationale == "use the fast exponential."
    assert parsed.category == "compute"  # free text is kept when it is no known category


def test_last_complete_code_block_wins() -> None:
    first = SILU
    second = SILU.replace("BLOCK_SIZE 256", "BLOCK_SIZE 128")
    answer = f"Current:\n```cuda\n{first}```\nImproved:\n```cuda\n{second}```\n"
    parsed = parse_answer(answer)
    assert parsed.payload == second
    assert parsed.rationale == "Current:"  # no RATIONALE label: the prose before the edit
    assert parsed.category == "other"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("I would vectorise the loads.", "no edit found"),
        ('RATIONALE: x\n```cuda\n#include "optiml.h"\n__global__ void k() {}\n```\n', "does not define optiml_forward"),
        (f"RATIONALE: x\n```cuda\n{SILU[:400]}", "not closed"),
        ("RATIONALE: x\n<<<<<<< SEARCH\n#define BLOCK_SIZE 256\n=======\n#define BLOCK_SIZE", "block 1 is incomplete"),
    ],
)
def test_unusable_answers(answer: str, message: str) -> None:
    with pytest.raises(EditParseError, match=message):
        parse_answer(answer)


def test_unparsed_answer_keeps_what_it_can() -> None:
    text = "RATIONALE: tile it\nCATEGORY: Tiling (shared memory)\n<<<<<<< SEARCH\nfoo\n"
    parsed = unparsed_answer(text)
    assert (parsed.kind, parsed.category, parsed.rationale, parsed.payload) == (
        "search_replace",
        "tiling",
        "tile it",
        text,
    )


@pytest.mark.parametrize(
    ("raw", "category"),
    [
        ("vectorization", "vectorization"),
        ("Memory Coalescing", "coalescing"),
        ("warp-level reduction", "warp_reduction"),
        ("Shared memory tiling", "tiling"),
        ("**unrolling**", "unrolling"),
        ("Tensor Cores (WMMA)", "tensor_cores"),
        ("", "other"),
    ],
)
def test_normalize_category(raw: str, category: str) -> None:
    assert normalize_category(raw) == category
