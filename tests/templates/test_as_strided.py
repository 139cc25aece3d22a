"""``as_strided`` that restates a contiguous layout (``nn.AdaptiveAvgPool1d(1)`` in KernelBench's SwinMLP head)
plans as the input or a reshape; any other striding is refused naming its strides."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.errors import OptimlError

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool1d(1)

    def forward(self, x):
        {body}


def get_inputs():
    return [torch.rand(3, 6, 10)]


def get_init_inputs():
    return []
"""

POOLED = "return torch.flatten(self.pool(x.transpose(1, 2)), 1) * 2.0"
RESTATED = "return torch.as_strided(x * 2.0, (3, 60), (60, 1))"
TRANSPOSED = "return torch.as_strided(x, (3, 10, 6), (60, 1, 10)) + 1.0"


@pytest.mark.parametrize("body", [POOLED, RESTATED])
def test_a_contiguous_restatement_plans(tmp_path: Path, body: str) -> None:
    assert planned(write_task(tmp_path, "strided", TASK.format(body=body))).describe()


def test_other_strides_are_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(OptimlError) as caught:
        planned(write_task(tmp_path, "transposed", TASK.format(body=TRANSPOSED)))
    message = str(caught.value)
    assert "\n" not in message and "as_strided" in message and "strides (60, 1, 10)" in message


@needs_gxx
def test_they_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for name, body in (("pooled", POOLED), ("restated", RESTATED)):
        kernels = planned(write_task(tmp_path, name, TASK.format(body=body)))
        units.append((kernels.task, name, kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
