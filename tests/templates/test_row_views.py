"""A view of a value computed in the kernel (``exp(a).unsqueeze(1) * b``): laid out like the domain, on the emulator.

The view's input comes from outside the kernel (recomputed from an input), so its dims must follow
the view's output into the domain — not be right-aligned to it, which once read ``a`` along the
size-1 dim and wrote one row of the result.
"""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn

N, M, C = 40, 24, 6
OPTIML = {{"shape_sets": [{{"N": 7, "M": 33, "C": 3}}]}}


class Model(nn.Module):
    def forward(self, a, b):
        return {body}


def get_inputs():
    return [torch.randn({a_shape}), torch.randn({b_shape})]


def get_init_inputs():
    return []
"""

CASES = [
    ("torch.exp(a).unsqueeze(1) * b", "N", "N, M"),
    ("(a * a).view(-1, 1) + b", "N", "N, M"),
    ("torch.sigmoid(a).view(-1, 1) * b + a.view(-1, 1)", "N", "N, M"),
    ("b * torch.sigmoid(a).view(1, C, 1)", "C", "N, C, M"),  # squeeze-excitation style channel gate
]


@needs_gxx
def test_views_of_recomputed_values_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, (body, a_shape, b_shape) in enumerate(CASES):
        kernels = planned(write_task(tmp_path, f"view_{k}", TASK.format(body=body, a_shape=a_shape, b_shape=b_shape)))
        units.append((kernels.task, body, kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
