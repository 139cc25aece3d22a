"""``nn.GroupNorm`` with its affine is one row kernel: the statistics, the normalisation and the per-channel
weight and bias over ``[N, groups, C / groups, H*W…]``, where the channel is a dim of the kernel's domain
(over ``[N, groups, C / groups * H*W]`` the affine needed a second pass over the output). Checked against torch
on the CPU emulator for every seed, at inputs of rank 2 to 5 and odd sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.task import Task

#: rank → (shape sets, the input's dims as written in get_inputs)
CASES = {
    "rank2": ([{"N": 5, "C": 12}, {"N": 3, "C": 24}], "N, C"),
    "rank3": ([{"N": 2, "C": 12, "L": 37}, {"N": 1, "C": 24, "L": 5}], "N, C, L"),
    "rank4": ([{"N": 2, "C": 24, "H": 9, "W": 13}, {"N": 3, "C": 12, "H": 3, "W": 5}], "N, C, H, W"),
    "rank5": ([{"N": 1, "C": 12, "D": 3, "H": 4, "W": 7}], "N, C, D, H, W"),
    # runs of H*W longer than a block's stride, which a thread steps across without dividing (vector and scalar)
    "rank4_long": ([{"N": 2, "C": 8, "H": 32, "W": 65}, {"N": 1, "C": 8, "H": 33, "W": 65}], "N, C, H, W"),
}


def _task(tmp_path: Path, name: str) -> Task:
    shape_sets, dims = CASES[name]
    constants = "\n".join(f"{k} = {v}" for k, v in shape_sets[0].items())
    text = f"""import torch
import torch.nn as nn

OPTIML = {{"dtype": "float32", "shape_sets": {shape_sets!r}}}
{constants}


class Model(nn.Module):
    def __init__(self, groups, channels):
        super().__init__()
        self.gn = nn.GroupNorm(groups, channels, eps=1e-5)
        gen = torch.Generator().manual_seed(3)
        with torch.no_grad():
            self.gn.weight.copy_(1.0 + 0.5 * torch.randn(channels, generator=gen))
            self.gn.bias.copy_(0.5 * torch.randn(channels, generator=gen))

    def forward(self, x):
        return self.gn(x)


def get_inputs():
    return [torch.randn({dims}) * 3.0 + 1.0]


def get_init_inputs():
    return [4, C]
"""
    return write_task(tmp_path, name, text)


@pytest.mark.parametrize("name", sorted(CASES))
def test_group_norm_and_its_affine_are_one_kernel(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name))
    assert [g.template for g in kernels.plan.groups] == ["reduce"], kernels.describe()
    assert not kernels.plan.materialized


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_group_norm_matches_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(_task(tmp_path, name))
    units = [(kernels.task, f"seed {k}", kernels.render(configs).code) for k, configs in enumerate(kernels.seeds(5))]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=11, tol=1e-4)
    assert not failures, "\n".join(failures)
