"""Every heuristic proposal still compiles with nvcc (CI has nvcc, no GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from propose_helpers import DATA_KERNELS, SILU_TASK, SUITE_KERNELS, read_kernel, suite_task

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.propose.base import ProposalContext
from optiml.propose.heuristic import HeuristicProposer

pytestmark = pytest.mark.nvcc


def test_all_heuristic_proposals_compile(tmp_path: Path) -> None:
    compiler = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "cache"))
    proposer = HeuristicProposer()
    kernels, labels = [], []
    for path in SUITE_KERNELS + DATA_KERNELS:
        task = suite_task(path) if path in SUITE_KERNELS else suite_task(SILU_TASK)
        for proposal in proposer.propose(ProposalContext(task=task, kernel=read_kernel(path)), 100):
            assert proposal.kernel is not None
            kernels.append(proposal.kernel)
            labels.append(f"{path.name}: {proposal.edit.summary(80)}")
    assert len(kernels) > 80
    failures = [
        f"{label}\n{result.error_summary()}"
        for label, result in zip(labels, compiler.compile_many(kernels), strict=True)
        if not result.ok
    ]
    assert not failures, "\n\n".join(failures)
