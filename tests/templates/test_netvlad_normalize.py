"""A NetVLAD-style pooling head (KernelBench level3/46 and 47, scaled down) on the emulator.

Soft-assignment to clusters, residuals against the weighted centres, then ``F.normalize`` twice
(intra-normalisation over the features, then over the flattened descriptor). Its renders once
stopped at "internal: value N has no storage": ``F.normalize`` expands its clamped norm back over
the row, and that expand was planned as a view of memory the kernel never wrote.
"""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F

B, N, D, K, G = 2, 10, 8, 4, {ghosts}
OPTIML = {{"mode": "eval", "shape_sets": [{{"B": 3, "N": 6}}]}}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.centres = nn.Parameter(torch.randn(D, K + G) / D**0.5)
        self.weighted = nn.Parameter(torch.randn(1, D, K) / D**0.5)
        self.bn = nn.BatchNorm1d(K + G)

    def forward(self, x):
        n = x.size(1)
        x = x.view(-1, D)
        a = F.softmax(self.bn(torch.matmul(x, self.centres)), dim=1)[:, :K].view(-1, n, K)
        centres = torch.sum(a, dim=1, keepdim=True) * self.weighted
        vlad = torch.matmul(a.transpose(1, 2), x.view(-1, n, D)).transpose(1, 2) - centres
        vlad = F.normalize(vlad)
        return F.normalize(vlad.reshape(-1, K * D))


def get_inputs():
    return [torch.randn(B, N, D)]


def get_init_inputs():
    return []
"""


@needs_gxx
def test_netvlad_heads_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for ghosts in (0, 3):
        kernels = planned(write_task(tmp_path, f"netvlad_{ghosts}", TASK.format(ghosts=ghosts)))
        units.append((kernels.task, f"{ghosts} ghost clusters", kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=11, tol=1e-4)
    assert not failures, "\n".join(failures)
