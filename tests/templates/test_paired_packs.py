"""Row kernels with two packs in flight a thread (``ilp=2``): both loaded before either is used, the second one
team stride on and used only where it lies inside the row (or the block's share of it). Checked against torch on
the CPU emulator in every row variant, at row lengths whose last stride holds one pack or none, with element-wise
stores, a reduction and its store pass, softmax taken online, and GroupNorm's flat row of two runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from emulated_tasks import emulator_mismatches, planned, task_text, write_task
from test_gemm_template import needs_gxx

from optiml.templates.base import GroupConfig

#: rows of 4·k elements: with 32 lanes of 4 (a warp's stride 128, its doubled stride 256) rows of 36, 132, 388 end
#: inside the first pack, past it, and in a doubled stride's second pack; 1 row and many rows; vec 2 and 4 both
#: take the vector path.
SHAPES = [{"B": 3, "N": 36}, {"B": 5, "N": 132}, {"B": 2, "N": 388}, {"B": 1, "N": 1028}]

TASKS = {
    "bias_relu": task_text(
        SHAPES,
        "x, b\nreturn torch.relu(x + b) * 0.5",
        "[torch.randn(B, N), torch.randn(N)]",
    ),
    "softmax": task_text(SHAPES, "x\nreturn torch.softmax(x * 3.0, dim=-1)", "[torch.randn(B, N)]"),
    "layernorm": task_text(
        SHAPES,
        "x, w\nmu = x.mean(-1, keepdim=True)\nv = ((x - mu) ** 2).mean(-1, keepdim=True)\n"
        "return (x - mu) * torch.rsqrt(v + 1e-5) * w",
        "[torch.randn(B, N) * 2.0 + 1.0, torch.randn(N)]",
    ),
    "row_sum_of_squares": task_text(SHAPES, "x\nreturn (x * x).sum(-1)", "[torch.randn(B, N)]"),
    # a flat row of two runs (channels of a group × H·W) under a per-channel affine
    "group_norm": task_text(
        [{"N": 2, "C": 8, "H": 4, "W": 12}, {"N": 1, "C": 8, "H": 33, "W": 4}, {"N": 3, "C": 4, "H": 2, "W": 2}],
        "x, w, b\nreturn torch.nn.functional.group_norm(x, 2, w, b, eps=1e-5)",
        "[torch.randn(N, C, H, W) * 3.0 + 1.0, torch.randn(C), torch.randn(C)]",
    ),
}


def _paired(vec: int) -> list[GroupConfig]:
    return [
        GroupConfig.of("warp_row", threads=128, vec=vec, items=0, ilp=2),
        GroupConfig.of("block_row", threads=128, vec=vec, items=0, ilp=2),
        GroupConfig.of("split_row", threads=128, vec=vec, blocks_per_sm=2, ilp=2),
    ]


@needs_gxx
@pytest.mark.parametrize("name", sorted(TASKS))
def test_two_packs_a_thread_match_torch_in_every_row_variant(name: str, tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, name, TASKS[name]))
    default = kernels.default()
    space = kernels.spaces[-1]
    units = []
    for config in [*_paired(4), *_paired(2)]:
        if space.reason_invalid(config) is None:
            units.append((kernels.task, config.label(), kernels.render([*default[:-1], config]).code))
    assert len(units) >= 4, kernels.describe()
    failures = emulator_mismatches(tmp_path / "emu", units, seed=5, tol=1e-4)
    assert not failures, "\n".join(failures)


def test_the_paired_kernel_loads_both_packs_before_it_uses_either(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "bias_relu", TASKS["bias_relu"]))
    config = GroupConfig.of("block_row", threads=128, vec=4, items=0, ilp=2)
    code = kernels.render([config]).code
    vector = code[code.index("if (VEC > 1) {") :]
    first_load, second_load = vector.index(" pk0; "), vector.index(" pn0; if (more)")
    first_use = vector.index("pk0.v[0]")
    assert first_load < second_load < first_use
    assert "e += (int64_t)256 * VEC" in vector  # the team's stride, doubled


def test_ilp_is_offered_where_packs_are_and_left_out_means_one(tmp_path: Path) -> None:
    kernels = planned(write_task(tmp_path, "bias_relu", TASKS["bias_relu"]))
    space = kernels.spaces[0]
    assert space.reason_invalid(GroupConfig.of("block_row", threads=128, vec=4, items=0)) is None
    assert "vec > 1" in (space.reason_invalid(GroupConfig.of("block_row", threads=128, vec=1, items=0, ilp=2)) or "")
    assert "items = 0" in (space.reason_invalid(GroupConfig.of("block_row", threads=128, vec=4, items=2, ilp=2)) or "")
    plain = GroupConfig.of("block_row", threads=128, vec=4, items=0)
    assert space.normalized(plain.with_params(ilp=1)) == plain
    assert kernels.render([plain]).code == kernels.render([plain.with_params(ilp=1)]).code
    steps = [move.config for move in kernels.neighbours([plain]) if move.knob == "ilp"]
    assert steps == [plain.with_params(ilp=2)]
    assert [move.config for move in kernels.neighbours([plain.with_params(ilp=2)]) if move.knob == "ilp"] == [plain]


def test_two_packs_a_thread_are_left_to_the_search_not_seeded(tmp_path: Path) -> None:
    """Timed against one pack a thread they lost or tied (35_GroupNorm_ 8.72 against 7.94 ms, 19_ReLU 4.564 against
    4.568 ms, nearest upsampling 0.277 against 0.248 ms; H100, c6ddcb5): the knob stays a move, not a seed."""
    norm = planned(write_task(tmp_path, "group_norm", TASKS["group_norm"]))
    assert all(configs[0].get("ilp", 1) == 1 for configs in norm.seeds(4))
    (default,) = norm.default()
    assert any(move.knob == "ilp" for move in norm.neighbours([default]))
