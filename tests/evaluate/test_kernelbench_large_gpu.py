"""KernelBench level-1 problems over 4 GiB, as KernelBench ships them, judged right on one GPU (issue 20).

Each tensor here is 6.4-7.5 GB: honest kernels must be accepted (no false "modified input"), the GPU
memory peak must stay within the stated plan, and the trivial fakes must still be rejected.
Needs ~100 GB of free GPU memory (an H200); skipped elsewhere.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from optiml.evaluate.config import EvalConfig
from optiml.evaluate.evaluator import Evaluator
from optiml.evaluate.memory import USABLE_FRACTION
from optiml.evaluate.results import EvalResult, EvalStatus
from optiml.kernel.source import KernelSource
from optiml.task import load_task

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
KERNELS = HERE.parent / "adversarial" / "kernels"
FAST = EvalConfig(min_trials=5, max_trials=10, timing_seconds=0.3, timeout_s=600)

RELU = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

batch_size = 4096
dim = 393216

def get_inputs():
    x = torch.rand(batch_size, dim)
    return [x]

def get_init_inputs():
    return []
"""
SOFTMAX = RELU.replace("torch.relu(x)", "torch.softmax(x, dim=1)")
SUM = RELU.replace("torch.relu(x)", "torch.sum(x, dim=1)")
RMSNORM = """import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, num_features: int, eps: float = 1e-5):
        super(Model, self).__init__()
        self.num_features = num_features
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)
        return x / rms

batch_size = 112
features = 64
dim1 = 512
dim2 = 512

def get_inputs():
    x = torch.rand(batch_size, features, dim1, dim2)
    return [x]

def get_init_inputs():
    return [features]
"""


@pytest.fixture(autouse=True)
def _needs_an_h200_worth_of_memory() -> None:
    if torch.cuda.is_available() and torch.cuda.mem_get_info()[0] < 100 * 2**30:
        pytest.skip("needs 100 GiB of free GPU memory")


def _evaluate(tmp_path: Path, name: str, text: str, kernels: list[Path]) -> list[EvalResult]:
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    with Evaluator(load_task(path), FAST) as evaluator:
        return [evaluator.evaluate(KernelSource.from_file(k)) for k in kernels]


def _within_plan(result: EvalResult) -> None:
    memory = result.memory
    assert memory["peak_bytes"] > 0 and memory["footprint_bytes"] > 4 * 2**30, memory
    plan = memory["plan"]
    assert memory["peak_bytes"] <= plan["bound_bytes"], memory
    assert memory["peak_bytes"] <= USABLE_FRACTION * plan["device_bytes"], memory
    assert 0 < memory["device_used_bytes"] <= plan["device_bytes"], memory


def test_19_relu_honest_accepted_identity_rejected(tmp_path: Path) -> None:
    honest, identity = _evaluate(tmp_path, "19_ReLU", RELU, [KERNELS / "honest_relu.cu", KERNELS / "identity_relu.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    assert honest.verify is not None and "normal" in honest.verify.distributions
    _within_plan(honest)
    assert identity.status is EvalStatus.WRONG_ANSWER and "normal inputs" in identity.message, identity.message


def test_23_softmax_honest_accepted_zeros_rejected(tmp_path: Path) -> None:
    honest, zeros = _evaluate(
        tmp_path, "23_Softmax", SOFTMAX, [KERNELS / "honest_softmax_wide.cu", KERNELS / "zero_softmax.cu"]
    )
    assert honest.status is EvalStatus.OK, honest.message
    assert any("atol tightened" in note for note in honest.task_notes), honest.task_notes
    _within_plan(honest)
    assert zeros.status is EvalStatus.WRONG_ANSWER, zeros.message


def test_47_sum_reduction_honest_accepted(tmp_path: Path) -> None:
    (honest,) = _evaluate(tmp_path, "47_Sum_reduction", SUM, [KERNELS / "honest_rowsum.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    _within_plan(honest)


def test_36_rmsnorm_fits_the_gpu_and_is_accepted(tmp_path: Path) -> None:
    (honest,) = _evaluate(tmp_path, "36_RMSNorm_", RMSNORM, [HERE / "data" / "rmsnorm.cu"])
    assert honest.status is EvalStatus.OK, honest.message
    _within_plan(honest)
