"""``all`` / ``any`` over a row beside other reductions: every lane reaches the warp shuffles.

The combine was ``a && shfl(a)``: a lane whose ``a`` was already false skipped the shuffle, and the warp
deadlocked (the emulator says "EMU deadlock"; on a GPU it hangs or is undefined). Found through
``scaled_dot_product_attention``'s safe softmax (``all(x == -inf)`` beside the softmax's max and sum).
"""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {body}


def get_inputs():
    return [torch.randn(6, 40)]


def get_init_inputs():
    return []
"""

CASES = [
    "torch.ops.aten._safe_softmax.default(x, -1)",
    "(x > 1).all(-1, keepdim=True).float() + x.softmax(-1)",
    "(x > 1).any(-1, keepdim=True).float() * x.amax(-1, keepdim=True)",
    "(x > -3).all(-1).float() + (x < 2).any(-1).float() + x.sum(-1)",
]


@needs_gxx
def test_boolean_reductions_beside_others_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, body in enumerate(CASES):
        kernels = planned(write_task(tmp_path, f"bools_{k}", TASK.format(body=body)))
        for seed in kernels.seeds():  # every row variant: warp, block and split combines
            units.append((kernels.task, f"{body} {[c.label() for c in seed]}", kernels.render(seed).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=29, tol=1e-5)
    assert not failures, "\n".join(failures)
