"""BatchNorm as KernelBench runs it (training mode: batch statistics) and in eval mode, planned and run on the emulator.

KernelBench never calls ``model.eval()``, so ``nn.BatchNorm*`` normalises each channel by the mean and
biased variance of its batch and spatial values. The planner must cut that into a reduction (not the
eval-mode per-channel affine map), after a GEMM or a convolution too, and the kernels must match the
training-mode reference; ``OPTIML = {"mode": "eval"}`` brings the affine map back.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

BN2D = """import torch
import torch.nn as nn

N, C, H, W = 5, 6, 7, 9
OPTIML = {{"shape_sets": [{{"N": 2, "C": 3, "H": 11, "W": 5}}]{extra}}}


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm2d(c)
        with torch.no_grad():  # not the fresh 1 / 0: a wrong affine or statistic shows
            self.bn.weight.uniform_(0.5, 1.5)
            self.bn.bias.uniform_(-0.5, 0.5)
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn(N, C, H, W) * 2 + 0.5]


def get_init_inputs():
    return [C]
"""

GEMM_BN = """import torch
import torch.nn as nn

B, K, F = 16, 24, 10
OPTIML = {"shape_sets": [{"B": 5, "K": 7, "F": 33}]}


class Model(nn.Module):
    def __init__(self, k, f):
        super().__init__()
        self.gemm = nn.Linear(k, f)
        self.bn = nn.BatchNorm1d(f, eps=1e-3)

    def forward(self, x):
        return torch.relu(self.bn(self.gemm(x) * 2.0))


def get_inputs():
    return [torch.randn(B, K)]


def get_init_inputs():
    return [K, F]
"""

CONV_BN = """import torch
import torch.nn as nn

N, C, H, W = 3, 4, 10, 12
OPTIML = {"shape_sets": [{"N": 2, "C": 3, "H": 7, "W": 9}]}


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, 5, 3)
        self.bn = nn.BatchNorm2d(5)

    def forward(self, x):
        return torch.tanh(self.bn(self.conv(x))) * 1.5


def get_inputs():
    return [torch.randn(N, C, H, W)]


def get_init_inputs():
    return [C]
"""

BN3D = """import torch
import torch.nn as nn

N, C, D, H, W = 2, 3, 4, 5, 6
OPTIML = {"shape_sets": [{"N": 3, "C": 2, "D": 3, "H": 3, "W": 7}]}


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bn = nn.BatchNorm3d(c, affine=False)

    def forward(self, x):
        return self.bn(x) - 0.25


def get_inputs():
    return [torch.rand(N, C, D, H, W)]


def get_init_inputs():
    return [C]
"""

TASKS = {
    "bn2d_train": (BN2D.format(extra=""), "reduce[mean sub mul mean add rsqrt mul mul add]"),
    "bn2d_eval": (BN2D.format(extra=', "mode": "eval"'), "pointwise[sub mul mul add]"),
    "gemm_bn_train": (GEMM_BN, "gemm[matmul add mul] → reduce[mean sub mul mean add rsqrt mul mul add relu]"),
    "conv_bn_train": (CONV_BN, "conv[conv] → reduce[mean sub mul mean add rsqrt mul mul add tanh mul]"),
    "bn3d_train": (BN3D, "reduce[mean sub mul mean add rsqrt mul sub]"),
}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_the_mode_decides_the_plan(tmp_path: Path, name: str) -> None:
    text, plan = TASKS[name]
    assert planned(write_task(tmp_path, name, text)).describe() == plan


@needs_gxx
def test_batch_statistics_and_running_statistics_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for name, (text, _) in sorted(TASKS.items()):
        kernels = planned(write_task(tmp_path, name, text))
        for configs in kernels.seeds(4):  # split_row, col and col_split among them
            label = " + ".join(c.label() for c in configs)
            units.append((kernels.task, label, kernels.render(configs).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=2e-5)
    assert not failures, "\n".join(failures)


@needs_gxx
def test_an_eval_mode_kernel_fails_the_training_mode_reference(tmp_path: Path) -> None:
    """The mistake issue 41 found: a running-statistics kernel verified against eval mode fails KernelBench's check."""
    train = planned(write_task(tmp_path, "bn2d_train", TASKS["bn2d_train"][0]))
    eval_ = planned(write_task(tmp_path, "bn2d_eval", TASKS["bn2d_eval"][0]))
    code = eval_.render(eval_.default()).code
    failures = emulator_mismatches(tmp_path / "emu", [(train.task, "eval kernel", code)], seed=5, tol=2e-5)
    assert len(failures) == train.task.num_shape_sets, failures


@pytest.mark.gpu
def test_every_seed_verifies_through_the_harness_on_the_gpu(tmp_path: Path) -> None:
    """On a GPU: each task's seeds, planned for this device, pass the harness's trials at every shape set
    against the reference as it runs there (training-mode BatchNorm through cuDNN, eval mode for one)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    from tu import gpu_trial_failures

    from optiml.evaluate.runtime import TaskRuntime
    from optiml.kernel.compiler import Compiler, CompilerConfig
    from optiml.templates.kernels import template_kernels

    compiler = Compiler(CompilerConfig(cache_dir=tmp_path / "cache"))
    failures = []
    for name, (text, _) in sorted(TASKS.items()):
        kernels = template_kernels(write_task(tmp_path, name, text))
        configs = kernels.seeds(4)
        built = compiler.compile_many([kernels.render(c) for c in configs])
        runtime = TaskRuntime(kernels.task, "cuda")
        for config, compiled in zip(configs, built, strict=True):
            failures += gpu_trial_failures(runtime, compiled, f"{name} " + " + ".join(c.label() for c in config))
    assert not failures, "\n".join(failures)
