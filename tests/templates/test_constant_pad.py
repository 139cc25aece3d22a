"""``F.pad`` in constant mode (KernelBench's level-3 Mamba2 pads a cumulative sum), captured as slices and
concatenations with constant blocks, planned and run on the CPU emulator against torch."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

PADDED = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, x):
        return torch.exp(-F.pad(x, {pad}, value={value})) + x.sum()


def get_inputs():
    return [torch.rand(3, 5, 7)]


def get_init_inputs():
    return []
"""

PADS = {
    "before_last": ("(1, 0)", 0.0),
    "both_two_dims": ("(2, 1, 0, 3)", 2.5),
    "negative_trims": ("(-2, 1, 1, -1)", -1.0),
}


@pytest.mark.parametrize("name", sorted(PADS))
def test_a_constant_pad_plans_as_slices_and_concatenations(tmp_path: Path, name: str) -> None:
    pad, value = PADS[name]
    plan = planned(write_task(tmp_path, name, PADDED.format(pad=pad, value=value))).describe()
    assert "cat[cat]" in plan, plan


@needs_gxx
def test_constant_pads_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for name, (pad, value) in sorted(PADS.items()):
        kernels = planned(write_task(tmp_path, name, PADDED.format(pad=pad, value=value)))
        units += [(kernels.task, f"{name} {s[0].label()}", kernels.render(s).code) for s in kernels.seeds(2)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
