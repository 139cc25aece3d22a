"""Slices with a step (``x[:, 1::2, 0::2]``: Swin's patch merging), captured as a view and a slice of
its first column, planned and run on the CPU emulator against torch."""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

STEPPED = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        merged = torch.cat([x[:, 0::2, 0::2, :], x[:, 1::2, 0::2, :], x[:, 0::2, 1::2, :], x[:, 1::2, 1::2, :]], -1)
        return merged * 2.0, x[:, 1::3, 2:7:2, :] + 1.0, x[..., ::2], x[:, ::2] * 3.0


def get_inputs():
    return [torch.rand(2, 8, 8, 5)]


def get_init_inputs():
    return []
"""


def test_stepped_slices_plan(tmp_path: Path) -> None:
    plan = planned(write_task(tmp_path, "stepped", STEPPED)).describe()
    assert "slice[slice]" in plan and "cat[cat]" in plan


@needs_gxx
def test_stepped_slices_match_torch_on_the_emulator(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "stepped", STEPPED))
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(2)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=13, tol=1e-6)
    assert not failures, "\n".join(failures)
