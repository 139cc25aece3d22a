"""Getting the code out of model answers."""

from __future__ import annotations

import pytest
from generate_helpers import silu_kernel

from optiml.code_blocks import fenced_blocks
from optiml.generate.answers import NoCodeError, extract_cuda, extract_python

KERNEL = silu_kernel(1.0, "a")
TASK = "import torch\nclass Model:\n    pass\ndef get_inputs():\n    return []\n"


def test_takes_the_last_complete_cuda_block_after_prose_and_fragments() -> None:
    text = (
        "The idea: one float4 per thread.\n\n```cuda\n__global__ void k();\n```\n\n"
        f"Full file:\n\n```cpp\n{KERNEL}```\nDone."
    )
    assert extract_cuda(text) == KERNEL


def test_a_block_whose_closing_fence_is_missing_runs_to_the_end() -> None:
    assert extract_cuda(f"Here:\n```cuda\n{KERNEL}") == KERNEL


def test_crlf_and_tilde_fences_and_longer_fences() -> None:
    assert extract_cuda("~~~cu\r\n" + KERNEL.replace("\n", "\r\n") + "~~~\r\n") == KERNEL
    inner = "````cuda\n" + KERNEL + "```\nnot the end\n````\n"
    assert extract_cuda(inner) == KERNEL + "```\nnot the end\n"


def test_an_unfenced_answer_is_taken_whole_when_it_is_a_kernel() -> None:
    assert extract_cuda(KERNEL) == KERNEL.strip() + "\n"


@pytest.mark.parametrize(
    "text",
    [
        "I would use shared memory.",
        "```python\nprint('optiml_forward')\n```",  # wrong language
        "```cuda\n__global__ void k() {}\n```",  # no entry point
    ],
)
def test_answers_without_a_kernel_say_what_is_expected(text: str) -> None:
    with pytest.raises(NoCodeError, match="no ```cuda block with a complete source defining optiml_forward"):
        extract_cuda(text)


def test_python_task_files() -> None:
    assert extract_python(f"Softmax per row.\n```python\n{TASK}```") == TASK
    assert extract_python(TASK) == TASK
    with pytest.raises(NoCodeError, match="complete task file"):
        extract_python("```python\nimport torch\n```")


def test_fenced_blocks_reports_languages_in_order() -> None:
    blocks = fenced_blocks("```python\na\n```\ntext\n```\nb\n```\n")
    assert [(b.language, b.body) for b in blocks] == [("python", "a\n"), ("", "b\n")]
