"""The skeleton tells a 0-dim device tensor (BatchNorm's num_batches_tracked) from a host scalar (ABI 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from optiml.kernel.compiler import Compiler, CompilerConfig
from optiml.kernel.skeleton import render_skeleton
from optiml.kernel.source import KernelSource
from optiml.task import load_task

BATCHNORM = """
import torch
import torch.nn as nn
class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.bn = nn.BatchNorm2d(features)
    def forward(self, x, eps: float):
        return self.bn(x) * eps
def get_inputs():
    return [torch.rand(2, 4, 8, 8), 0.5]
def get_init_inputs():
    return [4]
"""


def test_num_batches_tracked_is_a_device_tensor_and_eps_a_host_scalar(tmp_path: Path) -> None:
    path = tmp_path / "bn.py"
    path.write_text(BATCHNORM)
    text = render_skeleton(load_task(path))
    assert "bn_num_batches_tracked: int64 0-dim DEVICE tensor (memory == OPTIML_DEVICE" in text
    assert "eps: host scalar (float), 0-dim, memory == OPTIML_HOST" in text


@pytest.mark.nvcc
def test_the_skeleton_compiles_against_abi_2(tmp_path: Path) -> None:
    path = tmp_path / "bn.py"
    path.write_text(BATCHNORM)
    result = Compiler(CompilerConfig(arch="sm_90a", cache_dir=tmp_path / "kernels")).compile(
        KernelSource(render_skeleton(load_task(path)))
    )
    assert result.ok, result.error_summary()
