"""Row kernels over a domain with size-1 dims: a reduction whose reduced dims are cut only by dims of size 1
(``instance_norm`` computes over ``[1, B*C, H, W]``), and views that insert or remove size-1 dims of the
group's values, stay one kernel and match torch on the CPU emulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

ROWS = [{"B": 6, "N": 40}, {"B": 3, "N": 7}]
IMAGES = [{"B": 3, "C": 5, "H": 6, "W": 7}, {"B": 2, "C": 3, "H": 4, "W": 9}]

INSTANCE_NORM_OF_ROWS = task_text(
    ROWS,
    "x, y\nx = self.norm(x.unsqueeze(1).unsqueeze(1)).squeeze(1).squeeze(1)\nreturn (x + y) * y",
    "[torch.randn(B, N) * 3 + 1, torch.randn(B, N)]",
    init="self.norm = nn.InstanceNorm2d(N)",
)
VIEWS_AROUND_A_SOFTMAX = task_text(
    [{"B": 5, "N": 33}, {"B": 2, "N": 9}],
    "x, w\ns = torch.softmax(x.view(B, 1, N), dim=-1)\nreturn s.view(B, N) * w + s.squeeze(1)",
    "[torch.randn(B, N), torch.randn(N)]",
)
GLOBAL_AVG_POOL = task_text(
    IMAGES,
    "x\nreturn F.adaptive_avg_pool2d(F.gelu(x), 1).squeeze(-1).squeeze(-1)",
    "[torch.randn(B, C, H, W)]",
    imports="import torch.nn.functional as F\n",
)
CAUSAL_MASK_SOFTMAX = task_text(
    [{"B": 2, "T": 9}, {"B": 1, "T": 5}],
    "att\nt = att.size(-1)\natt = att.masked_fill(self.bias[:, :, :t, :t] == 0, float('-inf'))\n"
    "return torch.softmax(att, dim=-1)",
    "[torch.randn(B, 3, T, T)]",
    init='self.register_buffer("bias", torch.tril(torch.ones(12, 12)).view(1, 1, 12, 12))',
)
MASKED_EXP_VIEWS = task_text(
    [{"B": 3, "L": 8}, {"B": 2, "L": 5}],
    "x, m\nreturn torch.exp(torch.where(m > 0.3, x, -torch.inf)).unsqueeze(1).unsqueeze(-1)",
    "[torch.randn(B, L, L), torch.rand(B, L, L)]",
)
MEAN_OVER_A_SIZE_ONE_DIM = task_text(
    ROWS,
    "x\nx = torch.max(x, dim=1, keepdim=True).values\nx = x - x.mean(dim=1, keepdim=True)\n"
    "return torch.nn.functional.gelu(x)",
    "[torch.randn(B, N)]",
)
INSTANCE_NORM_4D = task_text(
    [{"B": 2, "C": 3, "H": 5, "W": 7}, {"B": 1, "C": 2, "H": 3, "W": 4}],
    "x\nreturn self.norm(x) / 2.0",
    "[torch.randn(B, C, H, W) * 2 + 1]",
    init="self.norm = nn.InstanceNorm2d(C)",
)
POOLED_LOGSUMEXP = task_text(
    [{"B": 3, "C": 6, "H": 4, "W": 5}, {"B": 2, "C": 3, "H": 3, "W": 2}],
    "x, bias\nx = torch.mean(x, dim=(2, 3), keepdim=True) + bias\n"
    "return torch.logsumexp(x, dim=1, keepdim=True) * 10.0",
    "[torch.randn(B, C, H, W), torch.randn(C, 1, 1)]",
)
SOFTMAX_BEFORE_A_SIZE_ONE_DIM = task_text(
    [{"B": 5, "N": 37}, {"B": 2, "N": 9}],
    "x\nreturn torch.softmax(x.unsqueeze(-1), dim=1) * 3",
    "[torch.randn(B, N)]",
)

CASES = {
    "rows_instance_norm": INSTANCE_NORM_OF_ROWS,
    "softmax_views": VIEWS_AROUND_A_SOFTMAX,
    "global_avg_pool": GLOBAL_AVG_POOL,
    "causal_mask_softmax": CAUSAL_MASK_SOFTMAX,
    "masked_exp_views": MASKED_EXP_VIEWS,
    "mean_over_a_size_one_dim": MEAN_OVER_A_SIZE_ONE_DIM,
    "instance_norm_4d": INSTANCE_NORM_4D,
    "pooled_logsumexp": POOLED_LOGSUMEXP,
    "softmax_before_a_size_one_dim": SOFTMAX_BEFORE_A_SIZE_ONE_DIM,
}


def test_a_reduction_over_the_last_dim_but_size_one_ones_gets_the_row_variants(tmp_path: Path) -> None:
    """``[B, N, 1]`` reduced over N: its elements are contiguous, so a row per warp or block, not a column."""
    kernels = planned(write_task(tmp_path, "softmax_1", SOFTMAX_BEFORE_A_SIZE_ONE_DIM))
    assert {s[0].variant for s in kernels.seeds(3)} <= {"warp_row", "block_row", "split_row"}


def test_a_reduction_over_size_one_dims_only_is_a_thread_a_row(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "mean_1", MEAN_OVER_A_SIZE_ONE_DIM))
    assert next(iter(kernels.seeds(1)))[1].variant == "col"


@pytest.mark.parametrize(
    ("name", "plan"),
    [
        ("rows_instance_norm", "reduce[mean sub mul mean add rsqrt mul view view view add mul]"),
        ("softmax_views", "reduce[amax sub exp sum div view mul add]"),
        ("global_avg_pool", "reduce[mul mul erf add mul mean view view]"),
        # the mask's first slice is a copy (a slice of a slice); the second is read in place, its `eq` recomputed
        ("causal_mask_softmax", "slice[slice] → reduce[where amax sub exp sum div]"),
        ("masked_exp_views", "pointwise[view view]"),  # the element-wise chain over inputs recomputed in it
    ],
)
def test_views_of_size_one_dims_stay_in_the_row_kernel(name: str, plan: str, tmp_path: Path) -> None:
    assert planned(write_task(tmp_path, name, CASES[name])).describe() == plan


@needs_gxx
@pytest.mark.parametrize("name", sorted(CASES))
def test_views_of_size_one_dims_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, name, CASES[name]))
    units = [(kernels.task, " + ".join(c.label() for c in s), kernels.render(s).code) for s in kernels.seeds(3)]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=3, tol=1e-4)
    assert not failures, "\n".join(failures)
