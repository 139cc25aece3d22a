"""Element-wise ops after a reshape of a computed value move ahead of it (``view_sinking``): GroupNorm's tail
(a per-channel scale, a clamp, a residual add of the input) joins GroupNorm's one kernel, whose domain is
``[N, groups, C / groups, H*W]``. Checked: the run pairing, the operand re-views, the plans (what moves and what
must stay with another kernel's program), and the moved kernels against torch on the CPU emulator."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.templates.kernels import TemplateKernels
from optiml.templates.view_sinking import operand_shape, reshape_runs

SHAPES = [{"N": 2, "C": 8, "H": 5, "W": 7}, {"N": 3, "C": 8, "H": 4, "W": 4}]
INPUTS = "[torch.randn(N, C, H, W) * 2.0 + 0.5]"
GROUP_NORM = """self.gn = nn.GroupNorm(4, C)
gen = torch.Generator().manual_seed(2)
self.scale = nn.Parameter(torch.randn(C, 1, 1, generator=gen))
with torch.no_grad():
    self.gn.weight.copy_(1.0 + 0.3 * torch.randn(C, generator=gen))
    self.gn.bias.copy_(0.3 * torch.randn(C, generator=gen))"""
FORWARDS = {
    # a per-channel parameter, a clamp with constant bounds, the input itself added back
    "scale_clamp_residual": "x\ny = self.gn(x) * self.scale\nreturn torch.clamp(y, -1.0, 1.0) + x",
    "swish_twice": "x\ny = self.gn(x)\ny = y * torch.sigmoid(y)\nreturn y * torch.sigmoid(y)",
    # the log-sum-exp's subtraction reads its max: it stays in the log-sum-exp's kernel
    "logsumexp_after": "x\nreturn torch.logsumexp(torch.tanh(self.gn(x)), dim=1, keepdim=True)",
}


def _kernels(tmp_path: Path, name: str) -> TemplateKernels:
    text = task_text(SHAPES, FORWARDS[name], INPUTS, init=GROUP_NORM)
    return planned(write_task(tmp_path, name, text))


def test_reshape_runs_pair_the_dims_a_reshape_merges_or_splits() -> None:
    assert reshape_runs((2, 8, 5, 7), (2, 4, 2, 35)) == [([0], [0]), ([1], [1, 2]), ([2, 3], [3])]
    assert reshape_runs((6, 1, 4), (24,)) == [([0, 1, 2], [0])]
    assert reshape_runs((2, 3), (3, 2)) == [([0, 1], [0, 1])]  # no boundary in common: one run
    assert reshape_runs((4, 3), (5,)) is None  # not a reshape
    assert reshape_runs((4, 0), (0, 4)) is None


def test_an_operand_is_re_viewed_where_it_spans_or_skips_whole_runs() -> None:
    out, src = (2, 8, 5, 7), (2, 4, 2, 35)
    assert operand_shape((8, 1, 1), out, src) == (1, 4, 2, 1)  # per channel
    assert operand_shape((2, 8, 5, 7), out, src) == src  # the whole tensor
    assert operand_shape((5, 7), out, src) == (1, 1, 1, 35)
    assert operand_shape((2, 1, 1, 1), out, src) == (2, 1, 1, 1)
    assert operand_shape((7,), out, src) is None  # broadcast over part of the run H*W
    assert operand_shape((1, 2, 8, 5, 7), out, src) is None  # would broadcast the output up a rank


@pytest.mark.parametrize("name", ["scale_clamp_residual", "swish_twice"])
def test_group_norm_s_element_wise_tail_joins_its_kernel(name: str, tmp_path: Path) -> None:
    kernels = _kernels(tmp_path, name)
    assert [g.template for g in kernels.plan.groups] == ["reduce"], kernels.describe()
    assert not kernels.plan.materialized


def test_an_op_reading_another_kernel_s_statistic_stays_with_it(tmp_path: Path) -> None:
    kernels = _kernels(tmp_path, "logsumexp_after")
    described = kernels.describe()
    assert [g.template for g in kernels.plan.groups] == ["reduce", "reduce"], described
    assert "tanh" in described.split(" → ")[0]  # the tanh moved into GroupNorm's kernel
    assert "sub exp sum" in described.split(" → ")[1]  # the log-sum-exp's own program is whole


@needs_gxx
@pytest.mark.parametrize("name", sorted(FORWARDS))
def test_moved_tails_match_torch_on_the_emulator(name: str, tmp_path: Path) -> None:
    kernels = _kernels(tmp_path, name)
    units = [(kernels.task, f"seed {k}", kernels.render(configs).code) for k, configs in enumerate(kernels.seeds(4))]
    failures = emulator_mismatches(tmp_path / "emu", units, seed=7, tol=1e-4)
    assert not failures, "\n".join(failures)
