"""What `optiml propose` gives the LLM and writes for a person (issue 16, item 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from propose_helpers import SILU_TASK, TASKS, read_kernel, suite_task
from typer.testing import CliRunner

from optiml.cli import app
from optiml.propose.base import ProposalContext, TargetGPU
from optiml.propose.heuristic import HeuristicProposer
from optiml.propose.output import write_proposals
from optiml.propose.prompts import load_prompts

runner = CliRunner()
SILU_KERNEL = TASKS / "silu.naive.cu"
ANSWER = """RATIONALE: Memory bound; more threads per block keep more loads in flight.
CATEGORY: launch_config
EDIT:
<<<<<<< SEARCH
#define BLOCK_SIZE 256  // threads per block
=======
#define BLOCK_SIZE 512  // threads per block
>>>>>>> REPLACE
"""


def test_proposals_md_shows_each_usable_proposal_s_diff(tmp_path: Path) -> None:
    parent = read_kernel(SILU_TASK)
    proposals = HeuristicProposer().propose(ProposalContext(task=suite_task(SILU_TASK), kernel=parent), 2)
    write_proposals(proposals, tmp_path, parent=parent)
    markdown = (tmp_path / "proposals.md").read_text()
    assert markdown.count("```diff\n--- a/kernel.cu\n+++ b/proposal_") == 2
    records = json.loads((tmp_path / "proposals.json").read_text())["proposals"]
    for record in records:
        changed = [line for line in record["diff"].splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
        assert changed, record  # the diff shows the edit itself


def test_propose_command_writes_the_diffs(tmp_path: Path) -> None:
    out = tmp_path / "p"
    result = runner.invoke(app, ["propose", str(TASKS / "silu.py"), str(SILU_KERNEL), "-n", "2", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "```diff" in (out / "proposals.md").read_text()


def test_the_target_gpu_section_renders_only_when_known() -> None:
    context = ProposalContext(task=suite_task(SILU_TASK), kernel=read_kernel(SILU_TASK))
    plain = load_prompts().messages(context)[1].content
    assert "# Target GPU" not in plain  # prompts without a target render as before
    h200 = TargetGPU("sm_90a", "NVIDIA H200", 132, 227 * 1024, 228 * 1024, 60 * 2**20, 141 * 2**30, 4000.0)
    shown = load_prompts().messages(ProposalContext(task=context.task, kernel=context.kernel, target=h200))[1]
    assert "# Target GPU\n\nNVIDIA H200, sm_90a: 132 SMs, 227 KiB shared memory per block (opt-in)" in shown.content
    assert "4000 GB/s measured copy bandwidth" in shown.content
    assert shown.content.replace(f"# Target GPU\n\n{h200.describe()}\n\n", "") == plain
    assert "no GPU is visible" in TargetGPU("sm_90a").describe()


@pytest.mark.nvcc
def test_llm_proposer_gets_the_compile_evidence_and_the_target(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kernel_cache: Path
) -> None:
    from llm_servers import OpenAIServer, answer

    with OpenAIServer() as server:
        server.script(answer(ANSWER))
        monkeypatch.setenv("OPTIML_LLM_BASE_URL", server.base_url)
        monkeypatch.setenv("OPTIML_LLM_MODEL", "test-model")
        args = ["propose", str(TASKS / "silu.py"), str(SILU_KERNEL), "--proposer", "llm", "-n", "1"]
        result = runner.invoke(app, [*args, "-o", str(tmp_path / "p"), "--store", str(tmp_path / "runs.db")])
        prompt = server.requests[0].messages[-1]["content"]
    assert result.exit_code == 0, result.output
    assert "Not evaluated yet." not in prompt
    assert "compiles for sm_" in prompt and "- ptxas, " in prompt and " registers, " in prompt
    assert "# Target GPU" in prompt and "sm_" in prompt.split("# Target GPU", 1)[1].splitlines()[2]
    assert "current kernel: compiles for" in result.output
