"""Slices (``x[:, a:b]``, ``chunk``, ``split``, ``narrow``, ``select``, ``unbind``): read in place by the row
kernels that use them, or made contiguous by the row-copy kernel; constant parts of a concatenation. All
checked against torch on the CPU emulator."""

from __future__ import annotations

from pathlib import Path

from emulated_tasks import emulator_mismatches, planned, write_task
from test_gemm_template import needs_gxx

TASK = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
{body}


def get_inputs():
    return [torch.randn({x}).to({dtype})]


def get_init_inputs():
    return []
"""

CASES = [  # body (indented), x shape, dtype, the plan: a slice only row kernels use is read in place
    ("        a, b = x.chunk(2, dim=-1)\n        return a * torch.sigmoid(b)", "6, 14", "torch.float32",
     "pointwise[sigmoid mul]"),  # GLU: one kernel
    ("        a, b = x.chunk(2, dim=-1)\n        return a * torch.sigmoid(b)", "4, 512", "torch.float32",
     "pointwise[sigmoid mul]"),
    ("        return x[:, 2:9] * 2", "3, 11, 5", "torch.float32", "pointwise[mul]"),
    ("        return x[:, -3:] + x[:, :3]", "4, 10", "torch.float32", "pointwise[add]"),
    ("        return x[:, 1:4].sum(dim=1) + x[:, :, 2:].amax(dim=(1, 2), keepdim=True)[:, 0]", "3, 6, 5",
     "torch.float32", "reduce"),  # reductions over slices, a run cut before the sliced dim
    ("        return x[:, 0] + x[:, 2]", "5, 4, 6", "torch.float32", "pointwise[view view add]"),  # select
    ("        return x[:, 1] @ x[0]", "4, 4, 4", "torch.float32", "pointwise[view view] → gemm[matmul]"),  # for a GEMM
    ("        a, b = torch.split(x, [3, 5], dim=1)\n        return torch.cat([b, a], 1)", "2, 8, 3", "torch.float32",
     "slice[slice] → slice[slice] → cat[cat]"),
    ("        a, b, c = x.unbind(0)\n        return a * b + c", "3, 7, 5", "torch.float32",
     "pointwise[view view view mul add]"),
    ("        return x.narrow(1, 1, 4).contiguous()", "3, 9", "torch.int64", "slice[slice]"),
    ("        return x[:, 1:5].contiguous()", "3, 40, 8", "torch.float16", "slice[slice]"),
    # KernelBench level 1, problem 92: an exclusive cumsum through a concatenated zero column
    (
        "        zero = torch.zeros_like(x.select(1, 0).unsqueeze(1))\n"
        "        return torch.cumsum(torch.cat((zero, x), dim=1)[:, :-1], dim=1)",
        "6, 33",
        "torch.float32",
        "cat[cat] → slice[slice] → scan",
    ),
]  # fmt: skip


@needs_gxx
def test_slices_match_torch_on_the_emulator(tmp_path: Path) -> None:
    units = []
    for k, (body, x, dtype, plan) in enumerate(CASES):
        kernels = planned(write_task(tmp_path, f"slice_{k}", TASK.format(body=body, x=x, dtype=dtype)))
        assert plan in kernels.describe(), (body, kernels.describe())
        units.append((kernels.task, body.strip(), kernels.render(kernels.default()).code))
    failures = emulator_mismatches(tmp_path / "emu", units, seed=13, tol=1e-3)
    assert not failures, "\n".join(failures)


def test_a_strided_slice_plans_as_a_view_and_a_slice(tmp_path: Path) -> None:
    """``x[:, ::2]``: a view as (count, step) and its first column, which a row kernel reads in place
    (tests/templates/test_stepped_slice.py runs such slices on the emulator)."""
    task = write_task(
        tmp_path, "every_other", TASK.format(body="        return x[:, ::2] * 2", x="4, 8", dtype="torch.float32")
    )
    assert planned(task).describe() == "pointwise[view mul]"  # the row kernel reads the columns in place
