"""KernelBench level-1 problems over 4 GiB, at the sizes KernelBench ships (issue 20), judged right on one GPU.

Each tensor here is 6.4-7.5 GB (``data/kb_*.py``): honest kernels must be accepted (no false "modified
input"), the GPU memory peak must stay within the stated plan, and the trivial fakes must still be
rejected. Needs ~100 GiB of free GPU memory (an H200); skipped elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.memory import USABLE_FRACTION
from optiml.kernel.source import KernelSource
from optiml.task import load_task
from optiml.values import EvalResult, EvalStatus

pytestmark = pytest.mark.gpu

DATA = Path(__file__).resolve().parent / "data"
KERNELS = DATA.parents[1] / "adversarial" / "kernels"
FAST = EvalConfig(min_trials=5, max_trials=10, timing_seconds=0.3, timeout_s=600)


@pytest.fixture(autouse=True)
def _needs_an_h200_worth_of_memory() -> None:
    if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:  # other workers' memory comes and goes
        pytest.skip("needs the whole GPU: run without -n")
    if torch.cuda.is_available() and torch.cuda.mem_get_info()[0] < 100 * 2**30:
        pytest.skip("needs 100 GiB of free GPU memory")


def _evaluate(problem: str, kernels: list[Path]) -> list[EvalResult]:
    with Evaluator(load_task(DATA / f"kb_{problem}.py"), FAST) as evaluator:
        return [evaluator.evaluate(KernelSource.from_file(k)) for k in kernels]


def _within_plan(result: EvalResult) -> None:
    memory = result.memory
    assert memory["peak_bytes"] > 0 and memory["footprint_bytes"] > 4 * 2**30, memory
    plan = memory["plan"]
    assert memory["peak_bytes"] <= plan["bound_bytes"], memory
    assert memory["peak_bytes"] <= USABLE_FRACTION * plan["device_bytes"], memory
    assert 0 < memory["device_used_bytes"] <= plan["device_bytes"], memory


def test_19_relu_honest_accepted_identity_rejected() -> None:
    honest, identity = _evaluate("19_ReLU", [KERNELS / "honest_relu.cu", KERNELS / "identity_relu.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    assert honest.verify is not None and "normal" in honest.verify.distributions
    _within_plan(honest)
    assert identity.status is EvalStatus.WRONG_ANSWER and "normal inputs" in identity.message, identity.message


def test_23_softmax_honest_accepted_zeros_rejected() -> None:
    honest, zeros = _evaluate("23_Softmax", [KERNELS / "honest_softmax_wide.cu", KERNELS / "zero_softmax.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    assert any("atol tightened" in note for note in honest.task_notes), honest.task_notes
    _within_plan(honest)
    assert zeros.status is EvalStatus.WRONG_ANSWER, zeros.message


def test_26_gelu_honest_accepted() -> None:
    (honest,) = _evaluate("26_GELU_", [DATA / "gelu.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    _within_plan(honest)


def test_47_sum_reduction_honest_accepted() -> None:
    (honest,) = _evaluate("47_Sum_reduction", [KERNELS / "honest_rowsum.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    _within_plan(honest)


def test_36_rmsnorm_fits_the_gpu_and_is_accepted() -> None:
    (honest,) = _evaluate("36_RMSNorm_", [DATA / "rmsnorm.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    _within_plan(honest)
