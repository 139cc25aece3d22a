"""``Tensor.unfold`` as vision transformers cut an image into patches: a split view and a permute.

``img.unfold(2, p, p).unfold(3, p, p).reshape(B, -1, p * p * C)`` (KernelBench level3/28) plans and
matches torch on the emulator; windows that overlap are refused in one line naming the op.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.graph.capture import UnsupportedOpError, capture_all

TASK = """import torch
import torch.nn as nn

B, C, S, P = 2, 3, 8, 4
OPTIML = {{"shape_sets": [{{"B": 3, "C": 2, "S": 12, "P": 4}}]}}


class Model(nn.Module):
    def forward(self, img):
        return {body}


def get_inputs():
    return [torch.randn(B, C, S, S)]


def get_init_inputs():
    return []
"""

CASES = [
    "img.unfold(2, P, P).unfold(3, P, P).reshape(img.shape[0], -1, P * P * img.shape[1])",
    "img.unfold(3, P, P) * 2.0",  # the last dim: a view alone
    "torch.relu(img.unfold(1, 1, 1)).sum(-1)",
]


@needs_gxx
def test_patch_unfolds_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, body in enumerate(CASES):
        kernels = planned(write_task(tmp_path, f"unfold_{k}", TASK.format(body=body)))
        units.append((kernels.task, body, kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=7, tol=1e-5)
    assert not failures, "\n".join(failures)


def test_overlapping_windows_are_refused_naming_unfold(tmp_path: Path) -> None:
    task = write_task(tmp_path, "overlap", TASK.format(body="img.unfold(2, P, 2).sum(-1)"))
    with pytest.raises(UnsupportedOpError, match=r"aten\.unfold.*overlapping or partial windows"):
        capture_all(task)
