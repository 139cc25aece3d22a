"""``expand`` / ``expand_as`` in row kernels: a broadcast, never a storage alias, on the emulator.

An expand once planned as a view of its operand's memory: a row kernel read an expanded input with
the expanded shape's strides (``x / y.expand_as(x)`` divided by the wrong elements), and an expand
of a value computed in the kernel (``F.normalize``'s clamped norm) had no storage at render
("internal: value 5 has no storage"). A per-row value broadcast by a constant of the output's shape
(``x[:, :1] * torch.ones_like(x)``) was written once a row, leaving the rest of each row unwritten.
"""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F

N, M = 40, 24
OPTIML = {{"shape_sets": [{{"N": 7, "M": 33}}]}}


class Model(nn.Module):
    def forward(self, x, y, w):
        return {body}


def get_inputs():
    return [torch.randn(N, M), torch.rand(N, 1) + 0.5, torch.randn(M, M)]


def get_init_inputs():
    return []
"""

CASES = [
    "F.normalize(x, p=2.0, dim=1)",  # issue 43
    "x / y.expand_as(x)",  # an expanded input: read with stride 0 along the broadcast dim
    "x * torch.sigmoid(y).expand_as(x)",  # an expand of a value recomputed from an input
    "x / x.norm(dim=1, keepdim=True).expand_as(x)",  # an expand of the kernel's own statistic
    "x.amax(1, keepdim=True).expand(N, M) - x",
    "(x @ w).sum(1, keepdim=True).expand_as(x) + x",  # a statistic of a product, expanded
    "(x @ w)[:, :1].expand_as(x) * x",  # a slice of a stored product, expanded
    "y.expand(N, M)",  # the output is the broadcast itself: every element written
    "x.sum(1, keepdim=True).expand(N, M)",
    "x[:, :1] * torch.ones_like(x)",  # a slice read in place, broadcast by a constant of the output's shape
    "torch.zeros_like(x) + y",  # an input column, likewise
    "x.amax(1, keepdim=True) * torch.full_like(x, 2.0)",  # the kernel's own statistic, likewise
]


@needs_gxx
def test_expands_plan_as_broadcasts_and_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, body in enumerate(CASES):
        kernels = planned(write_task(tmp_path, f"expand_{k}", TASK.format(body=body)))
        units.append((kernels.task, body, kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
