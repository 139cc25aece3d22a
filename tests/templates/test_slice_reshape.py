"""Slices reshaped, and expands concatenated: each its own kernel's input, right on the emulator.

A slice that row kernels read in place through its source's strides was also read so when it was
reshaped (``q, k, v = x.split(C, 2); q.view(B, T, H, C // H)``, attention's head split; NetVLAD's
``a[:, :K].view(B, N, K)``), or when an element-wise value over it was (``relu(q).view(...)``): the reshaped
dims stepped through the source with the wrong strides.
A ``cat`` read an ``expand`` of a class token as if the expand were memory (ViT's
``torch.cat([cls_token.expand(B, -1, -1), x], 1)``). Both gave wrong numbers without an error.
"""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn

B, T, C, H = 2, 5, 8, 2
OPTIML = {{"shape_sets": [{{"B": 3, "T": 4}}]}}


class Model(nn.Module):
    def forward(self, x, tok):
        {body}


def get_inputs():
    return [torch.randn(B, T, 3 * C), torch.randn(1, 1, 3 * C)]


def get_init_inputs():
    return []
"""

CASES = [
    "q, k, v = x.split(C, dim=2); return q.view(B, T, H, C // H).transpose(1, 2), v.view(B, T, H, C // H)",
    "q, k, v = x.split(C, dim=2); return torch.relu(q.view(B, T, H, C // H)).sum(-1)",
    "q, k, v = x.split(C, dim=2); return (q.view(B, T, H, C // H) * k.view(B, T, H, C // H)).sum(-1)",
    "q, k, v = x.split(C, dim=2); return q.reshape(B * T, C) + 1",
    "q, k, v = x.split(C, dim=2); return torch.sigmoid(q.unsqueeze(2)) * v.unsqueeze(2)",  # read in place
    # the reshape is of an element-wise value kernels recompute from the slice (it read past the tensor's end)
    "q, k, v = x.split(C, dim=2); return torch.relu(q).view(B, T, H, C // H).sum(-1)",
    "return torch.cat([tok.expand(x.shape[0], -1, -1), x], dim=1)",
]


@needs_gxx
def test_reshaped_slices_and_concatenated_expands_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, body in enumerate(CASES):
        kernels = planned(write_task(tmp_path, f"case_{k}", TASK.format(body=body)))
        units.append((kernels.task, body, kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-5)
    assert not failures, "\n".join(failures)
