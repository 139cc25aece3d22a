"""Prompt rendering: every piece of evidence reaches the model, versions are explicit."""

from __future__ import annotations

import pytest
from propose_helpers import TASKS, read_kernel, suite_task

from optiml.errors import ConfigError
from optiml.llm.types import ChatMessage
from optiml.propose.base import HistoryEntry, ProposalContext
from optiml.propose.prompts import MAX_HISTORY, PROMPT_VERSION, available_versions, load_prompts
from optiml.values import CompileDiagnostic, CompileResult, Edit, EvalResult, EvalStatus, KernelResources, TimingStats

ROW_SUM = TASKS / "row_sum.naive.cu"


def render(**kwargs: object) -> list[ChatMessage]:
    kernel = read_kernel(ROW_SUM).with_flags(("-Xptxas=-dlcm=ca",))
    ctx = ProposalContext(task=suite_task(ROW_SUM), kernel=kernel, **kwargs)  # type: ignore[arg-type]
    return load_prompts().messages(ctx)


def test_unevaluated_kernel_prompt() -> None:
    system, user = render()
    assert (system.role, user.role) == ("system", "user")
    assert "#define OPTIML_ABI_VERSION 2" in system.content and "warp_reduction" in system.content
    assert "# Task: row_sum" in user.content and "def get_inputs()" in user.content
    assert "(extra nvcc flags: -Xptxas=-dlcm=ca)" in user.content
    assert "row_sum_kernel<<<grid, BLOCK_SIZE" in user.content
    assert "Not evaluated yet." in user.content
    assert "# Profiler diagnosis" not in user.content and "# Edits already tried" not in user.content


def test_results_diagnosis_and_history_are_shown() -> None:
    compiled = CompileResult(
        ok=True,
        so_path=None,
        digest="d",
        arch="sm_90a",
        seconds=0.5,
        cached=False,
        resources=(
            KernelResources(name="row_sum_kernel", arch="sm_90a", registers=40, spill_stores=16, spill_loads=8),
        ),
    )
    result = EvalResult(
        status=EvalStatus.OK,
        compile=compiled,
        timing=TimingStats.from_samples([2.0, 2.0, 2.0]),
        reference={"eager": TimingStats.from_samples([1.0, 1.0, 1.0])},
        floor_ms=0.5,
    )
    history = tuple(
        HistoryEntry(Edit("knob", f"BLOCK_SIZE={i}", "launch_config", f"try {i}", "heuristic"), "ok", 1.0, 2.0)
        for i in range(MAX_HISTORY + 3)
    )
    _, user = render(result=result, diagnosis_text="Memory-bound: uncoalesced loads", history=history)
    text = user.content
    assert "correct; 2.0000 ms ± 0.0000; 0.50x vs PyTorch eager" in text
    assert (
        "- ptxas, row_sum_kernel: 40 registers, 0 B static shared memory, 16 B spill stores / 8 B spill loads" in text
    )
    assert "the kernel runs at 25% of that limit" in text
    assert "# Profiler diagnosis\n\nMemory-bound: uncoalesced loads" in text
    assert "try 14 → ok, 1.0000 ms (2.00x vs parent)" in text
    assert "try 2 →" not in text and "try 3 →" in text  # only the last MAX_HISTORY entries


def test_compile_error_feedback_carries_the_compiler_message() -> None:
    failed = CompileResult(
        ok=False,
        so_path=None,
        digest="d",
        arch="sm_90a",
        seconds=0.5,
        cached=False,
        diagnostics=(CompileDiagnostic("error", 'identifier "foo" is undefined', line=12),),
    )
    _, user = render(result=EvalResult(status=EvalStatus.COMPILE_ERROR, compile=failed))
    assert 'compile error:\nerror: line 12: identifier "foo" is undefined' in user.content


def test_retry_extends_the_conversation() -> None:
    prompts = load_prompts()
    conversation = render()
    retry = prompts.retry(conversation, "bad answer", "block 1 is incomplete")
    assert retry[:2] == conversation
    assert retry[2] == ChatMessage("assistant", "bad answer")
    assert retry[3].role == "user" and "Your answer could not be used: block 1 is incomplete" in retry[3].content


def test_versions() -> None:
    assert PROMPT_VERSION in available_versions()
    with pytest.raises(ConfigError, match=r"unknown prompt version 'v0'; available: propose_v1"):
        load_prompts("v0")
