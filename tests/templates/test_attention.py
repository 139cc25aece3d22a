"""``F.scaled_dot_product_attention`` (its math decomposition: two products around a safe softmax) planned
into template kernels, checked against torch on the CPU emulator; the safe softmax itself against ATen."""

from __future__ import annotations

from pathlib import Path

import torch
from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

from optiml.graph.decomps import safe_softmax

TASK = """import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v{extra})


def get_inputs():
    return [torch.randn(2, 3, 8, 16), torch.randn(2, 3, 12, 16), torch.randn(2, 3, 12, 16)]


def get_init_inputs():
    return []
"""


def test_the_safe_softmax_gives_zeros_for_rows_of_minus_infinity() -> None:
    x = torch.randn(4, 6)
    x[1] = float("-inf")
    x[2, :3] = float("-inf")
    expected = torch.ops.aten._safe_softmax.default(x, -1)
    torch.testing.assert_close(safe_softmax(x, -1), expected)
    assert torch.equal(safe_softmax(x, -1)[1], torch.zeros(6))


@needs_gxx
def test_attention_matches_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, extra in enumerate(["", ", scale=0.3", ", is_causal=True"]):
        kernels = planned(write_task(tmp_path, f"sdpa_{k}", TASK.format(extra=extra)))
        plan = kernels.describe()
        # the root of the scale that multiplies q and k^T each is applied once, to the product: no pass over
        # either operand, and k^T read in place (without a mask: three kernels, as KernelBench's 97 plans)
        assert "gemm[matmul mul" in plan and "pointwise[mul]" not in plan and "permute[" not in plan, plan
        if not extra:
            assert plan.count(" → ") == 2, plan
        assert "reduce[amax sub exp sum div" in plan, plan
        units.append((kernels.task, f"sdpa{extra}", kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=23, tol=1e-4)
    assert not failures, "\n".join(failures)
