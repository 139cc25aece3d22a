"""The fusion planner on every suite task: the kernels it cuts, by template family, and a few exact plans."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from optiml.graph.capture import capture_all
from optiml.graph.ir import Graph
from optiml.task import load_task
from optiml.templates.group import PermuteSpec, RowSpec, ScanSpec
from optiml.templates.plan import Plan, make_plan

ROOT = Path(__file__).resolve().parents[2]
SUITE = {p.stem: p for p in sorted([*ROOT.glob("tasks/*.py"), *ROOT.glob("tasks/memory/*.py")])}

#: each task's kernels by template family, in launch order
FAMILIES = {
    "amin_keepdim": "reduce",
    "argmax_last_dim": "reduce",
    "argmin_dim1": "reduce",
    "argmax_middle_dim": "reduce",
    "avgpool1d": "pool",
    "avgpool2d": "pool",
    "avgpool3d": "pool",
    "batchnorm2d_train": "reduce",
    "broadcast_fma": "pointwise",
    "channel_concat": "pointwise cat",
    "conv2d": "conv",
    "cosine_similarity_loss": "reduce reduce",
    "cross_entropy": "reduce reduce",
    "cross_entropy_vocab": "reduce reduce",
    "cumprod_last_dim": "scan",
    "cumsum_dim1": "scan",
    "exclusive_cumsum": "scan",
    "frobenius_normalize": "reduce",
    "gelu_erf": "pointwise",
    "gelu_tanh": "pointwise",
    "groupnorm": "reduce",
    "hinge_loss": "reduce",
    "huber_loss": "reduce",
    "instancenorm2d": "reduce",
    "kl_div_loss": "reduce",
    "l1_normalize_rows": "reduce",
    "l2_normalize_odd_rows": "reduce",
    "l2_normalize_rows": "reduce",
    "layernorm": "reduce",
    "layernorm_affine": "reduce",
    "leaky_relu": "pointwise",
    "log_softmax": "reduce",
    "logsumexp": "reduce",
    "masked_cumsum": "scan",
    "masked_where": "pointwise",
    "matmul": "gemm",
    "max_dim0": "reduce",
    "maxpool1d": "pool",
    "maxpool2d": "pool",
    "maxpool3d": "pool",
    "mean_dim1": "reduce",
    "mse_loss": "reduce",
    "permute_nchw_nhwc": "permute",
    "prefix_scan": "scan",
    "prod_last_dim": "reduce",
    "relu6": "pointwise",
    "reverse_cumsum": "scan",
    "rmsnorm": "reduce",
    "row_sum": "reduce",
    "silu": "pointwise",
    "silu_mul_bf16": "pointwise",
    "swiglu_chunk": "pointwise",
    "relative_position_bias": "index permute pointwise",
    "rotary_half": "pointwise",  # the halves read in place, the cat computed per element: one pass over x
    "silu_scale_bias": "pointwise",
    "softmax": "reduce",
    "softmax_dim1": "reduce",
    "softmax_long_rows": "reduce",
    "sum_all": "reduce",
    "sum_last_dim": "reduce",
    "swish_fp16": "pointwise",
    "transpose": "permute",
    "transpose_batched": "permute",
    "triplet_margin_loss": "reduce reduce",
    "upsample_nearest": "pointwise",
}

EXACT = {
    "softmax": "reduce[amax sub exp sum div]",
    "silu": "pointwise[sigmoid mul]",
    "reverse_cumsum": "scan[flip cumsum flip]",
    "transpose": "permute[permute]",
    "masked_cumsum": "scan[cumsum]",
    "log_softmax": "reduce[amax sub exp sum log sub]",
}


@cache
def graphs_of(stem: str) -> tuple[Graph, ...]:
    return tuple(capture_all(load_task(SUITE[stem])))


def plan_of(stem: str) -> Plan:
    return make_plan(list(graphs_of(stem)))


def test_the_table_covers_the_suite() -> None:
    assert set(FAMILIES) == set(SUITE)


@pytest.mark.parametrize("stem", sorted(FAMILIES))
def test_every_task_plans_into_the_expected_kernels(stem: str) -> None:
    plan = plan_of(stem)
    assert plan.groups, "every plan has at least one kernel"
    assert " ".join(g.template for g in plan.groups) == FAMILIES[stem], plan.describe()
    assert plan.describe() == " → ".join(g.describe() for g in plan.groups)
    assert [g.index for g in plan.groups] == list(range(len(plan.groups)))
    assert len(plan.graphs) == load_task(SUITE[stem]).num_shape_sets
    placed = [n for g in plan.groups for n in g.nodes]
    assert len(placed) == len(set(placed)), "a node belongs to one kernel"
    for group in plan.groups:
        assert group.nodes and group.outputs
    again = plan_of(stem)  # planning is deterministic
    assert again.describe() == plan.describe()
    assert [(g.nodes, g.inputs, g.outputs, g.spec) for g in again.groups] == [
        (g.nodes, g.inputs, g.outputs, g.spec) for g in plan.groups
    ]
    assert again.materialized == plan.materialized


@pytest.mark.parametrize("stem", sorted(EXACT))
def test_exact_plans(stem: str) -> None:
    assert plan_of(stem).describe() == EXACT[stem]


def test_cross_entropy_is_two_kernels_with_the_per_row_losses_materialized() -> None:
    plan = plan_of("cross_entropy")
    first, second = plan.groups
    assert first.describe().startswith("reduce[amax sub exp sum log")
    assert "gather" in first.describe()
    assert second.describe() == "reduce[sum cast sum div]"
    assert plan.materialized, "the second kernel reads what the first wrote to the workspace"
    assert set(plan.materialized) <= set(first.outputs)
    assert set(plan.materialized) & set(second.inputs)


def test_groupnorm_is_one_kernel_over_groups_and_channels() -> None:
    (kernel,) = plan_of("groupnorm").groups
    assert kernel.describe() == "reduce[mean sub mul mean add rsqrt mul mul add]"
    spec = kernel.spec_of(RowSpec)
    assert len(spec.shape) == 4 and spec.dims == (2, 3), "[N, groups, C / groups, H*W], reduced over the last two"


def test_reverse_cumsum_folds_the_flips_into_one_reverse_scan() -> None:
    (scan,) = plan_of("reverse_cumsum").groups
    assert scan.spec_of(ScanSpec).reverse is True
    assert scan.spec_of(ScanSpec).kind == "sum"
    assert plan_of("prefix_scan").groups[0].spec_of(ScanSpec).reverse is False


def test_transpose_is_a_permute_with_its_perm() -> None:
    (permute,) = plan_of("transpose").groups
    assert permute.template == "permute"
    assert permute.spec_of(PermuteSpec).perm == (1, 0)


def test_two_slices_from_one_start_keep_their_own_lengths(tmp_path: Path) -> None:
    """A slice's length is its output's shape, not an attr: ``x[:, :1]`` and ``x[:, :-1]`` are two values."""
    path = tmp_path / "two_slices.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def forward(self, x):\n        return x[:, :1] * 2.0, x[:, :-1] + 1.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(4, 16)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    plan = make_plan(capture_all(load_task(path)))
    slices = [n for n in plan.graph.nodes if n.op == "slice"]
    assert sorted(plan.graph.type(n.outputs[0]).shape for n in slices) == [(4, 1), (4, 15)]
    assert sorted(plan.graph.type(o).shape for o in plan.graph.outputs) == [(4, 1), (4, 15)]
